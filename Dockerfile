# syntax=docker/dockerfile:1
# Build stage: the official Go image, building with `make build` so the
# binary is made exactly as on a developer machine: cgo on, because GPU
# metrics come through go-nvml. The bookworm image already carries gcc and
# glibc's headers (build-essential); its glibc (2.36) is the runtime
# image's, so the binary never needs a newer glibc than it finds.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION
ARG REVISION=unknown
ARG BRANCH=unknown
RUN make build BINARY=/out/llm-prober REVISION="${REVISION}" BRANCH="${BRANCH}" BUILD_USER=docker \
    $( [ -n "${VERSION}" ] && echo VERSION="${VERSION}" )

# Run stage: distroless with glibc, no shell, runs as nonroot (uid 65532).
# The cgo binary links glibc, and NVML (libnvidia-ml.so.1, mounted by the
# NVIDIA container toolkit) is itself a glibc library dlopened at start, so
# the image needs glibc, not a static base. (`make build-nonvml` gives a
# fully static binary without GPU metrics, for a static or scratch image.)
FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/llm-prober /bin/llm-prober
# No configuration is built in: one that probes nothing real would start
# "healthy" and fail every probe. Without a mount the binary exits at once
# saying where the configuration belongs. Mount it (and API key files) here.
VOLUME ["/etc/llm-prober"]
USER nonroot
EXPOSE 9847
ENTRYPOINT ["/bin/llm-prober"]
CMD ["--config.file=/etc/llm-prober/llm-prober.yml"]

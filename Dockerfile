# syntax=docker/dockerfile:1
# Build stage: the official Go image, building with `make build` so the
# binary is made exactly as on a developer machine (static, CGO_ENABLED=0).
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
# The binary is built without cgo, but NVML (libnvidia-ml.so.1, mounted by
# the NVIDIA container toolkit) is a glibc library: purego loads it through
# the system's dynamic loader, so the image needs glibc, not a static base.
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

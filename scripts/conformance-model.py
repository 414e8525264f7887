#!/usr/bin/env python3
"""Write a tiny random-weight llama GGUF for `make conformance`.

No weights are downloaded: the tokenizer (vocabulary, scores, token types,
special token ids) is copied from a vocab-only GGUF that ships in llama.cpp's
models/ folder, and every tensor is random. llama-server loads it and
generates (meaningless) text at a few hundred tokens/s on one CPU core, which
is all a protocol conformance run needs.

    PYTHONPATH=$LLAMA_SRC/gguf-py /usr/bin/python3 scripts/conformance-model.py \
        --vocab $LLAMA_SRC/models/ggml-vocab-llama-spm.gguf \
        --out /root/.cache/llm-prober/tiny-llama.gguf

Needs numpy and PyYAML (Debian: python3-numpy, python3-yaml) and llama.cpp's
gguf-py on PYTHONPATH. gguf-py imports sentencepiece at load time for code
this script never calls; when it is not installed a stub stands in.
"""

import argparse
import sys
import types

try:
    import sentencepiece  # noqa: F401
except ImportError:
    stub = types.ModuleType("sentencepiece")
    stub.SentencePieceProcessor = object
    sys.modules["sentencepiece"] = stub

import numpy as np  # noqa: E402
import gguf  # noqa: E402

# ChatML, so /v1/chat/completions has a template whatever the vocab carries.
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def field_value(field):
    """The Python value of a scalar, string or array GGUF field."""
    t = field.types
    if t[0] == gguf.GGUFValueType.ARRAY:
        if t[1] == gguf.GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    if t[0] == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]].tolist()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", required=True, help="vocab-only GGUF (llama.cpp models/ggml-vocab-*.gguf)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-ff", type=int, default=256)
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    vocab = gguf.GGUFReader(args.vocab)
    if field_value(vocab.fields["general.architecture"]) != "llama":
        sys.exit(f"{args.vocab}: want a llama vocab (e.g. ggml-vocab-llama-spm.gguf)")
    tokens = field_value(vocab.fields["tokenizer.ggml.tokens"])
    n_vocab = len(tokens)

    arch = "llama"
    w = gguf.GGUFWriter(args.out, arch)
    w.add_name("llm-prober-conformance-tiny-random")
    w.add_context_length(args.n_ctx)
    w.add_embedding_length(args.n_embd)
    w.add_block_count(args.n_layer)
    w.add_feed_forward_length(args.n_ff)
    w.add_head_count(args.n_head)
    w.add_head_count_kv(args.n_head)
    w.add_rope_dimension_count(args.n_embd // args.n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    # The tokenizer, copied key by key from the vocab file.
    for key, field in vocab.fields.items():
        if not key.startswith("tokenizer.") or key == "tokenizer.chat_template":
            continue
        t = field.types
        if t[0] == gguf.GGUFValueType.ARRAY:
            # The writer infers the element type: str, float32, int32.
            w.add_array(key, field_value(field))
        else:
            w.add_key_value(key, field_value(field), t[0])
    w.add_chat_template(CHATML)

    rng = np.random.default_rng(args.seed)

    def rand(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    ones = lambda n: np.ones(n, dtype=np.float32)  # noqa: E731
    e, ff = args.n_embd, args.n_ff
    # numpy shapes are (rows, cols) = GGUF's (ne1, ne0): (out, in) for matrices.
    w.add_tensor("token_embd.weight", rand(n_vocab, e))
    for i in range(args.n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", ones(e))
        w.add_tensor(f"blk.{i}.attn_q.weight", rand(e, e))
        w.add_tensor(f"blk.{i}.attn_k.weight", rand(e, e))
        w.add_tensor(f"blk.{i}.attn_v.weight", rand(e, e))
        w.add_tensor(f"blk.{i}.attn_output.weight", rand(e, e))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", ones(e))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", rand(ff, e))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rand(ff, e))
        w.add_tensor(f"blk.{i}.ffn_down.weight", rand(e, ff))
    w.add_tensor("output_norm.weight", ones(e))
    # Larger than the rest so the logits are not flat and sampling varies.
    w.add_tensor("output.weight", (rng.standard_normal((n_vocab, e)) * 0.5).astype(np.float32))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {args.out}: llama, {args.n_layer} layers, n_embd {e}, {args.n_head} heads, "
          f"n_ff {ff}, n_ctx {args.n_ctx}, vocab {n_vocab} (from {args.vocab}), f32 random weights")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Write a tiny random-weight llama or BERT-reranker GGUF for `make conformance`.

No weights are downloaded: the tokenizer (vocabulary, scores, token types,
special token ids) is copied from a vocab-only GGUF that ships in llama.cpp's
models/ folder, and every tensor is random. llama-server loads it and
generates (meaningless) text at a few hundred tokens/s on one CPU core, which
is all a protocol conformance run needs.

    PYTHONPATH=$LLAMA_SRC/gguf-py /usr/bin/python3 scripts/conformance-model.py \
        --vocab $LLAMA_SRC/models/ggml-vocab-llama-spm.gguf \
        --out /root/.cache/llm-prober/tiny-llama.gguf
    PYTHONPATH=$LLAMA_SRC/gguf-py /usr/bin/python3 scripts/conformance-model.py \
        --arch bert-rerank --vocab $LLAMA_SRC/models/ggml-vocab-bert-bge.gguf \
        --out /root/.cache/llm-prober/tiny-rerank.gguf

The second is a BERT (bge-style) cross-encoder with a classification head
(cls, cls.output: one score per query/document pair) and pooling type rank,
which is what `llama-server --reranking` needs; its scores are random but
deterministic for a given pair.

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
    ap.add_argument("--arch", choices=["llama", "bert-rerank"], default="llama")
    args = ap.parse_args()

    vocab = gguf.GGUFReader(args.vocab)
    if args.arch == "bert-rerank":
        write_bert_rerank(args, vocab)
        return
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


def copy_tokenizer(w, vocab):
    """Copy the tokenizer keys of a vocab-only GGUF into writer w."""
    for key, field in vocab.fields.items():
        if not key.startswith("tokenizer.") or key == "tokenizer.chat_template":
            continue
        t = field.types
        if t[0] == gguf.GGUFValueType.ARRAY:
            w.add_array(key, field_value(field))
        else:
            w.add_key_value(key, field_value(field), t[0])


def write_bert_rerank(args, vocab):
    """A BERT cross-encoder as llama.cpp's LLM_ARCH_BERT loads it, with the
    RoBERTa-style classification head that pooling type rank runs."""
    if field_value(vocab.fields["general.architecture"]) != "bert":
        sys.exit(f"{args.vocab}: want a bert vocab (ggml-vocab-bert-bge.gguf)")
    n_vocab = len(field_value(vocab.fields["tokenizer.ggml.tokens"]))
    e, ff = args.n_embd, args.n_ff
    n_ctx = min(args.n_ctx, 512)
    w = gguf.GGUFWriter(args.out, "bert")
    w.add_name("llm-prober-conformance-tiny-random-reranker")
    w.add_context_length(n_ctx)
    w.add_embedding_length(e)
    w.add_block_count(args.n_layer)
    w.add_feed_forward_length(ff)
    w.add_head_count(args.n_head)
    w.add_layer_norm_eps(1e-12)
    w.add_causal_attention(False)
    # LLAMA_POOLING_TYPE_RANK = 4 (llama.h); gguf-py's PoolingType enum of
    # this era stops at CLS.
    w.add_uint32("bert.pooling_type", 4)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    copy_tokenizer(w, vocab)
    # The bge vocab names no bos/eos; llama.cpp's rerank prompt is
    # [BOS]query[EOS][SEP]doc[EOS], so name them as converted BERT
    # rerankers do ([CLS] and [SEP]), else EOS is the null token.
    if "tokenizer.ggml.bos_token_id" not in vocab.fields:
        w.add_bos_token_id(101)
    if "tokenizer.ggml.eos_token_id" not in vocab.fields:
        w.add_eos_token_id(102)

    rng = np.random.default_rng(args.seed)

    def rand(*shape, scale=0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    ones = lambda n: np.ones(n, dtype=np.float32)  # noqa: E731
    zeros = lambda n: np.zeros(n, dtype=np.float32)  # noqa: E731
    w.add_tensor("token_embd.weight", rand(n_vocab, e))
    w.add_tensor("token_types.weight", rand(2, e))
    w.add_tensor("position_embd.weight", rand(n_ctx, e))
    w.add_tensor("token_embd_norm.weight", ones(e))
    w.add_tensor("token_embd_norm.bias", zeros(e))
    for i in range(args.n_layer):
        for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(f"blk.{i}.{t}.weight", rand(e, e))
            w.add_tensor(f"blk.{i}.{t}.bias", zeros(e))
        w.add_tensor(f"blk.{i}.attn_output_norm.weight", ones(e))
        w.add_tensor(f"blk.{i}.attn_output_norm.bias", zeros(e))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rand(ff, e))
        w.add_tensor(f"blk.{i}.ffn_up.bias", zeros(ff))
        w.add_tensor(f"blk.{i}.ffn_down.weight", rand(e, ff))
        w.add_tensor(f"blk.{i}.ffn_down.bias", zeros(e))
        w.add_tensor(f"blk.{i}.layer_output_norm.weight", ones(e))
        w.add_tensor(f"blk.{i}.layer_output_norm.bias", zeros(e))
    # Head: dense + tanh, then one logit. Larger weights than the body so
    # the scores of different documents differ visibly.
    w.add_tensor("cls.weight", rand(e, e, scale=0.5))
    w.add_tensor("cls.bias", zeros(e))
    w.add_tensor("cls.output.weight", rand(1, e, scale=0.5))
    w.add_tensor("cls.output.bias", zeros(1))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {args.out}: bert reranker, {args.n_layer} layers, n_embd {e}, {args.n_head} heads, "
          f"n_ff {ff}, n_ctx {n_ctx}, vocab {n_vocab} (from {args.vocab}), f32 random weights")


if __name__ == "__main__":
    main()

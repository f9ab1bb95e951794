#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/<target>/ (small valid files and broken variants).
Rerun after changing it; the files are committed so scripts/fuzz needs no Python."""
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None):
    header, body = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + body


def bf16(n, v=0.5):
    return struct.pack("<f", v)[2:] * n


f32 = lambda n, v=0.25: struct.pack("<f", v) * n

# safetensors
ok = safetensors([("a", "F32", [2, 3], f32(6)), ("b", "BF16", [4], bf16(4)), ("c", "I8", [3], b"\x01\x02\xff")],
                 {"model": "m"})
put("fuzz_safetensors", "valid", ok)
put("fuzz_safetensors", "empty_header", safetensors([]))
put("fuzz_safetensors", "truncated", ok[:-5])
put("fuzz_safetensors", "overlap", struct.pack("<Q", 96) + json.dumps(
    {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
     "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}).encode().ljust(96) + b"\0" * 12)
put("fuzz_safetensors", "huge_shape", safetensors([("a", "F32", [0, 18446744073709551615], b"")]))
put("fuzz_safetensors", "bad_dtype", safetensors([("a", "Q4", [1], b"\0")]))
put("fuzz_safetensors", "header_len_lies", struct.pack("<Q", 1 << 40) + b"{}")

# npy
def npy(descr, shape, data, version=1):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    pre = 10 if version == 1 else 12
    d = d.ljust((pre + len(d) + 1 + 63) // 64 * 64 - pre - 1) + "\n"
    hl = struct.pack("<H", len(d)) if version == 1 else struct.pack("<I", len(d))
    return b"\x93NUMPY" + bytes([version, 0]) + hl + d.encode() + data

put("fuzz_npy", "valid_f4", npy("<f4", "(2, 3)", f32(6)))
put("fuzz_npy", "valid_f8_v2", npy("<f8", "(3,)", struct.pack("<d", 1.5) * 3, 2))
put("fuzz_npy", "valid_f2", npy("<f2", "(2,)", b"\x00\x3c" * 2))
put("fuzz_npy", "fortran", npy("<f4", "(2, 2)", f32(4)).replace(b"False", b"True "))
put("fuzz_npy", "short_data", npy("<f4", "(4, 4)", f32(3)))
put("fuzz_npy", "big_dim", npy("<f4", "(99999999999999999999, 0)", b""))
put("fuzz_npy", "not_npy", b"PK\x03\x04 zip")

# llama2.c checkpoint (dim 8, hidden 8, 1 layer, 2 heads, 2 kv heads, vocab 4, seq 4)
def llama2c(vocab=4, extra=0):
    h = struct.pack("<7i", 8, 8, 1, 2, 2, vocab, 4)
    v = abs(vocab)
    n = v * 8 + (16 + 64 + 128 + 64 + 192) + 8 + 2 * 8 + (v * 8 if vocab < 0 else 0)
    return h + f32(n + extra, 0.01)

put("fuzz_llama2c", "valid", llama2c())
put("fuzz_llama2c", "untied", llama2c(-4))
put("fuzz_llama2c", "trailing", llama2c(4, 3))
put("fuzz_llama2c", "int_min_vocab", struct.pack("<7i", 8, 8, 1, 2, 2, -2**31, 4))
put("fuzz_llama2c", "huge_dims", struct.pack("<7i", 2**31 - 1, 2**31 - 1, 2**31 - 1, 1, 1, 2**31 - 1, 2**31 - 1))
tok = struct.pack("<i", 4)
for i in range(260):
    s = bytes([32 + i % 90]) if i >= 3 else b"<s>"
    tok += struct.pack("<fi", -float(i), len(s)) + s
put("fuzz_llama2c", "tokenizer_260", b"\x0a" + tok)
put("fuzz_llama2c", "tokenizer_nan", b"\x0a" + tok[:4] + struct.pack("<fi", float("nan"), 1) + b"a" + tok[13:])

# Hugging Face config.json (first byte even) / index.json (first byte odd)
cfg = {"model_type": "llama", "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
       "num_attention_heads": 2, "vocab_size": 4, "max_position_embeddings": 8}
put("fuzz_hf_config", "config_valid", b"\0" + json.dumps(cfg).encode())
put("fuzz_hf_config", "config_qwen2", b"\0" + json.dumps(dict(cfg, model_type="qwen2", num_key_value_heads=1,
                                                             head_dim=4, tie_word_embeddings=True)).encode())
for k, v in [("hidden_size", 2**32 + 16), ("hidden_size", 16.5), ("num_attention_heads", True),
             ("hidden_size", 1e30), ("rms_norm_eps", 1e300), ("bos_token_id", 99)]:
    put("fuzz_hf_config", "config_%s_%s" % (k, str(v).replace(".", "_")), b"\0" + json.dumps(dict(cfg, **{k: v})).encode())
put("fuzz_hf_config", "index_valid", b"\1" + json.dumps({"weight_map": {"model.embed_tokens.weight": "a.safetensors"}}).encode())
put("fuzz_hf_config", "index_escape", b"\1" + json.dumps({"weight_map": {"x": "../../../../etc/passwd"}}).encode())
put("fuzz_hf_config", "index_absolute", b"\1" + json.dumps({"weight_map": {"x": "/etc/passwd"}}).encode())
put("fuzz_hf_config", "nested", b"\0" + b"[" * 5000 + b"]" * 5000)

# tokenizer.json: JSON, NUL, text
vocab = {c: i for i, c in enumerate("abcdefghijklmnopqrstuvwxyz \u0120")}
vocab.update({"ab": 30, "abc": 31, "\u0120a": 32})
tj = {"model": {"type": "BPE", "vocab": vocab, "merges": ["a b", "ab c", "\u0120 a"]},
      "normalizer": {"type": "NFC"}, "added_tokens": [{"content": "<|x|>", "id": 33}]}
put("fuzz_tokenizer_json", "valid", json.dumps(tj).encode() + b"\0abc abcab <|x|> a\xcc\x81 \xff")
put("fuzz_tokenizer_json", "pair_merges", json.dumps(dict(tj, model=dict(tj["model"], merges=[["a", "b"]]))).encode() + b"\0ab")
put("fuzz_tokenizer_json", "negative_id", json.dumps({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}}).encode())
put("fuzz_tokenizer_json", "huge_id", json.dumps({"model": {"type": "BPE", "vocab": {"a": 2**31 - 1}, "merges": []}}).encode())
put("fuzz_tokenizer_json", "type_error", json.dumps(dict(tj, added_tokens=[{"content": 5, "id": 1}])).encode())
# pre-tokenizers: Split with its own regex (behaviours, invert), Digits, ByteLevel's own regex
qwen2_re = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
def pre(*steps):
    return json.dumps(dict(tj, pre_tokenizer={"type": "Sequence", "pretokenizers": list(steps) + [
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]})).encode()
def split(r, behavior="Isolated", invert=False):
    return {"type": "Split", "pattern": {"Regex": r}, "behavior": behavior, "invert": invert}
put("fuzz_tokenizer_json", "split_llama3", pre(split(qwen2_re)) + b"\0It's 12345 abc\r\n\n  x?! ")
put("fuzz_tokenizer_json", "split_behaviours", pre(split("(?>a+)|b++", "MergedWithPrevious", True), split("[^\\s]", "Contiguous"),
    {"type": "Digits", "individual_digits": True}) + b"\0aab ba12 cab")
put("fuzz_tokenizer_json", "split_lookahead", pre(split("(?i:AB)(?!c)|\\x{61}{2,3}?", "Removed")) + b"\0abc ABab aaaa")
put("fuzz_tokenizer_json", "split_bad_regex", pre(split("(?<=a)[b")) + b"\0ab")
put("fuzz_tokenizer_json", "split_catastrophic", pre(split("(?:a+)+b")) + b"\0" + b"a" * 200)
put("fuzz_tokenizer_json", "byte_level_regex", json.dumps(dict(tj, pre_tokenizer={"type": "ByteLevel", "add_prefix_space": False})).encode() + b"\0ab  abc's")
# SentencePiece conversions: Metaspace, Prepend/Replace/NFKC normalizers, byte_fallback, fuse_unk
spm = dict(tj, model=dict(tj["model"], vocab=dict(vocab, **{"\u2581": 34, "\u2581a": 35, "<unk>": 36, "<0xC3>": 37, "<0xA9>": 38}),
                          merges=["\u2581 a", "a b"], unk_token="<unk>", fuse_unk=True, byte_fallback=True))
put("fuzz_tokenizer_json", "metaspace", json.dumps(dict(spm, normalizer=None, pre_tokenizer={
    "type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True})).encode() + "\0a ab  \u00e9\u00eb\u00eb<|x|>ab".encode())
put("fuzz_tokenizer_json", "prepend_replace", json.dumps(dict(spm, normalizer={"type": "Sequence", "normalizers": [
    {"type": "NFKC"}, {"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"Regex": " +"}, "content": "\u2581"}]})).encode()
    + "\0a  ab \ufb01\u00e9<|x|>".encode())

# arbitrary text for the Qwen2 tokenizer
put("fuzz_bpe_encode", "english", "Hello world, it's 2024! \n\n  spaces\ttabs")
put("fuzz_bpe_encode", "unicode", "caf\u00e9 \u0065\u0301 \ud55c\uad6d\uc5b4 \u4e2d\u6587 \U0001F600 \u00a0\u2028")
put("fuzz_bpe_encode", "invalid_utf8", b"\xff\xfe\xc3\x28\xe2\x82 \xf0\x9f\x98")
put("fuzz_bpe_encode", "marks", "a" + "\u0301" * 200)
put("fuzz_bpe_encode", "special", "<|endoftext|>x<|im_start|>")

# captures and kernel outputs
q, k, v = bf16(2 * 4 * 8), bf16(4 * 8), bf16(4 * 8)
put("fuzz_capture", "valid", safetensors([("layers.0.q", "BF16", [2, 4, 8], q), ("layers.0.k", "BF16", [1, 4, 8], k),
                                          ("layers.0.v", "BF16", [1, 4, 8], v),
                                          ("layers.0.o.plain", "F32", [2, 4, 8], f32(64))], {"model": "m"}))
put("fuzz_capture", "n_tok_zero", safetensors([("layers.0.q", "BF16", [2, 0, 8], b""), ("layers.0.k", "BF16", [1, 0, 8], b""),
                                               ("layers.0.v", "BF16", [1, 0, 8], b"")]))
put("fuzz_capture", "gqa_mismatch", safetensors([("layers.0.q", "BF16", [3, 4, 8], bf16(96)), ("layers.0.k", "BF16", [2, 4, 8], bf16(64)),
                                                 ("layers.0.v", "BF16", [2, 4, 8], bf16(64))]))
put("fuzz_capture", "nan", safetensors([("layers.0.q", "BF16", [1, 1, 2], b"\xc0\x7f\x00\x00"),
                                        ("layers.0.k", "BF16", [1, 1, 2], bf16(2)), ("layers.0.v", "BF16", [1, 1, 2], bf16(2))]))

# CLI parsers: one argument per line
put("fuzz_cli_parsers", "valid", "fa3,sage2pp-sm89,,bf16\n0/2\nrotate\nblock_n=64\nq.fmt=e4m3fn\npv_acc.k_step=16\n")
put("fuzz_cli_parsers", "bad", "pv_acc.k_step=0\nqk_acc.k_step=-1\nblock_n=1000000000\np_scale=nan\nk.group_div=0\n3/2\n-1/4\n")
put("fuzz_cli_parsers", "numbers", "p_scale=1e400\nblock_m=2147483648\nmask_value=-inf\nk.scale_max=-448\n1/0\nx/y\n")

# loss shard files (attnum loss --shard) as merge reads them; a short array; deep nesting
shard = {"kind": "attnum-loss-shard", "tool_version": "0.1.0",
         "params": {"model": "m", "kernel": "fa3", "knobs": [], "transform_dtype": "bf16",
                    "rotation": "random-hadamard:24301", "conditions": ["plain", "rotate"], "reference": "bf16",
                    "linear_precision": "bf16", "n_tokens": 2, "windows": 1, "sources": ["t"], "n_sources": 1,
                    "bootstrap_samples": 10, "bootstrap_seed": 4384120558},
         "shard": 0, "n_shards": 1,
         "units": [{"source": 0, "window": 0, "condition": 0, "nll_ref": [1.0, 2.0], "nll_var": [1.5, 2.5],
                    "kl": [0.1, 0.2], "dp": [-0.1, 0.05], "top1_same": [1, 0]},
                   {"source": 0, "window": 0, "condition": 1, "nll_ref": [1.0, 2.0], "nll_var": [1.25, 2.0],
                    "kl": [0.05, 0.0], "dp": [-0.05, 0.0], "top1_same": [1, 1]}]}
put("fuzz_loss_shard", "shard", json.dumps(shard))
put("fuzz_loss_shard", "short_array", json.dumps(dict(shard, units=[dict(shard["units"][0], nll_var=[1.0])])))
put("fuzz_loss_shard", "deep_nesting", b'{"kind":"attnum-loss-shard","params":' + b"[" * 30000 + b"]" * 30000 + b"}")

# head-study result folders: first byte 0 study.json, 1 a unit file, 2 complete.json. The files
# "study_json", "unit" and "complete_marker" are copies of a real run's (attnum heads --zoo
# --n-tok 16 --layers 1 --texts 1 --conditions plain,rotate --kernel fa3 --shard 0/2), each
# after its selector byte; they are not rewritten here.
put("fuzz_result_folders", "deep_nesting", b'\x00{"a":' + b"[" * 30000 + b"]" * 30000 + b"}")
put("fuzz_result_folders", "study_array", b"\x00[]")
put("fuzz_result_folders", "unit_deep_line", b"\x01" + b"[" * 30000 + b'\n{"end":0,"n_rows":0}\n')

# GGUF (llama.cpp docs/gguf.md): tiny llama / qwen2 / qwen3 models with the byte-level BPE
# tokenizer of the 256 byte symbols, F16, BF16 and Q8_0 matrices; then broken variants.
def gguf(kv, tensors, version=3, alignment=32):
    s = lambda b: struct.pack("<Q", len(b)) + b
    def val(t, v):
        if t == 8:
            return s(v.encode())
        if t == 9:
            et, items = v
            return struct.pack("<IQ", et, len(items)) + b"".join(val(et, x) for x in items)
        return struct.pack({4: "<I", 5: "<i", 6: "<f", 7: "<?"}[t], v)
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    for k, t, v in kv:
        out += s(k.encode()) + struct.pack("<I", t) + val(t, v)
    off, body = 0, b""
    for name, ty, ne, raw in tensors:
        out += s(name.encode()) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", ty, off)
        raw += b"\0" * (-len(raw) % alignment)
        body += raw
        off += len(raw)
    return out + b"\0" * (-len(out) % alignment) + body


def gguf_model(arch, mtype):
    D, F, NH, NKV, V = 32, 32, 2, 1, 257
    hd = D // NH
    def mat(rows, cols):
        n = rows * cols
        if mtype == 1:
            return (1, [cols, rows], struct.pack("<e", 0.03125) * n)
        if mtype == 30:
            return (30, [cols, rows], bf16(n, 0.03125))
        return (8, [cols, rows], (struct.pack("<e", 0.001) + bytes(range(32))) * (n // 32))
    vec = lambda n: (0, [n], f32(n, 1.0))
    t = [("token_embd.weight",) + mat(V, D), ("output_norm.weight",) + vec(D)]
    p = "blk.0."
    t += [(p + "attn_norm.weight",) + vec(D), (p + "ffn_norm.weight",) + vec(D),
          (p + "attn_q.weight",) + mat(NH * hd, D), (p + "attn_k.weight",) + mat(NKV * hd, D),
          (p + "attn_v.weight",) + mat(NKV * hd, D), (p + "attn_output.weight",) + mat(D, NH * hd),
          (p + "ffn_gate.weight",) + mat(F, D), (p + "ffn_up.weight",) + mat(F, D), (p + "ffn_down.weight",) + mat(D, F)]
    if arch == "qwen2":
        t += [(p + "attn_q.bias",) + vec(NH * hd), (p + "attn_k.bias",) + vec(NKV * hd), (p + "attn_v.bias",) + vec(NKV * hd)]
    if arch == "qwen3":
        t += [(p + "attn_q_norm.weight",) + vec(hd), (p + "attn_k_norm.weight",) + vec(hd)]
    b2u, n = {}, 0
    for b in range(256):
        printable = 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b
        b2u[b] = chr(b) if printable else chr(0x100 + n)
        n += 0 if printable else 1
    tokens = [b2u[b] for b in range(256)] + ["<|endoftext|>"]
    a = arch + "."
    kv = [("general.architecture", 8, arch), (a + "block_count", 4, 1), (a + "context_length", 4, 64),
          (a + "embedding_length", 4, D), (a + "feed_forward_length", 4, F), (a + "attention.head_count", 4, NH),
          (a + "attention.head_count_kv", 4, NKV), (a + "attention.layer_norm_rms_epsilon", 6, 1e-5),
          (a + "rope.freq_base", 6, 10000.0), ("tokenizer.ggml.model", 8, "gpt2"),
          ("tokenizer.ggml.pre", 8, "llama-bpe" if arch == "llama" else "qwen2"),
          ("tokenizer.ggml.tokens", 9, (8, tokens)), ("tokenizer.ggml.token_type", 9, (5, [1] * 256 + [3])),
          ("tokenizer.ggml.merges", 9, (8, [b2u[ord("l")] + " " + b2u[ord("o")], "Ġ w"])),
          ("tokenizer.ggml.bos_token_id", 4, 256), ("tokenizer.ggml.add_bos_token", 7, arch == "llama")]
    return kv, t


for arch, mtype, name in (("llama", 1, "llama_f16"), ("qwen2", 8, "qwen2_q8_0"), ("qwen3", 30, "qwen3_bf16")):
    put("fuzz_gguf", name, gguf(*gguf_model(arch, mtype)))
kv, t = gguf_model("llama", 8)
good = gguf(kv, t)
put("fuzz_gguf", "llama_q8_0_v2", gguf(kv, t, version=2))
put("fuzz_gguf", "truncated", good[: len(good) // 2])
put("fuzz_gguf", "q4_0_tensor", gguf(kv, [t[0][:1] + (2,) + t[0][2:]] + t[1:]))
put("fuzz_gguf", "alignment_64", gguf(kv + [("general.alignment", 4, 64)], t, alignment=64))
put("fuzz_gguf", "header_only", good[:24])

# A vocabulary-only GGUF (no tensors) with a SentencePiece vocabulary (tokenizer.ggml.model
# llama): control and unknown tokens, the 256 <0xXX> byte tokens, scored pieces, a user-defined one.
spm = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)] + [(f"<0x{b:02X}>", 0.0, 6) for b in range(256)]
spm += [(p, -float(i), 1) for i, p in enumerate(["\u2581", "H", "e", "l", "o", "w", "r", "d", "ll", "\u2581H",
                                                  "\u2581w", "or", "llo", "\u2581Hello", "\u2581world", "1", "2"])]
spm += [("<extra>", 0.0, 4)]
put("fuzz_gguf", "spm_vocab_only", gguf([("general.architecture", 8, "llama"), ("tokenizer.ggml.model", 8, "llama"),
                                         ("tokenizer.ggml.tokens", 9, (8, [p for p, _, _ in spm])),
                                         ("tokenizer.ggml.scores", 9, (6, [s for _, s, _ in spm])),
                                         ("tokenizer.ggml.token_type", 9, (5, [t for _, _, t in spm])),
                                         ("tokenizer.ggml.bos_token_id", 4, 1),
                                         ("tokenizer.ggml.add_bos_token", 7, True)], []))

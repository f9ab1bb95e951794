"""GGUF model files: a tiny random Hugging Face checkpoint (llama, qwen2 with biases, qwen3 with
q_norm/k_norm), converted here to GGUF the way llama.cpp's convert_hf_to_gguf.py does (q/k rows
permuted for llama; F32, F16, BF16 or Q8_0 matrices), must give the Hugging Face folder's loss and
captures bit for bit, with the tokenizer stored in the GGUF. The GGUF writer below is written from
the format's specification (ggml-org/llama.cpp@a458664fc83b6513baea7adafcb0ef0626b006f8
docs/gguf.md), not from attnum's reader. Malformed and unsupported files exit 2 naming the field."""
import heapq
import json
import struct
import subprocess

import numpy as np
import pytest

from conftest import BINARY, cli

# --- Hugging Face side -------------------------------------------------------------------------


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (openai/gpt-2 encoder.py bytes_to_unicode)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


TEXT = ("The quick brown fox jumps over the lazy dog. It is 2024; the dog was not amused, "
        "and the fox ran 12345 metres away.\nThe end of the story is near, the end is here.\n") * 3

QWEN2_SPLIT = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
               "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
LLAMA3_SPLIT = QWEN2_SPLIT.replace("\\p{N}|", "\\p{N}{1,3}|")


def tiny_tokenizer(pre):
    """A byte-level BPE tokenizer.json: the 256 byte symbols, 40 merges learned greedily from
    TEXT's words, one added token; `pre` picks the Qwen2 (with NFC) or the Llama 3 split."""
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: i for i, b in enumerate(sorted(b2u))}
    words = [[b2u[b] for b in (" " + w).encode()] for w in TEXT.split()]
    merges = []
    for _ in range(40):
        counts = {}
        for w in words:
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + 1
        (a, b), _ = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append(f"{a} {b}")
        vocab[a + b] = len(vocab)
        for w in words:
            i = 0
            while i + 1 < len(w):
                if w[i] == a and w[i + 1] == b:
                    w[i:i + 2] = [a + b]
                i += 1
    added = [{"id": len(vocab), "content": "<|endoftext|>", "special": True}]
    regex = QWEN2_SPLIT if pre == "qwen2" else LLAMA3_SPLIT
    tok = {"model": {"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": pre != "qwen2"},
           "added_tokens": added,
           "normalizer": {"type": "NFC"} if pre == "qwen2" else None,
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
               {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}}
    return tok


def to_bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def round_to(x, dtype):
    """The float32 values `dtype` stores (what both files hold)."""
    if dtype == "F16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "BF16":
        return from_bf16_bits(to_bf16_bits(x))
    if dtype == "Q8_0":
        return dequantize_q8_0(*quantize_q8_0(x))
    return x.astype(np.float32)


def quantize_q8_0(x):
    """ggml-org/llama.cpp@01243c587feceaa5d6a6c2305535ef2f549c48b8 ggml/src/ggml-quants.c
    quantize_row_q8_0_ref, per block of 32 (float arithmetic): amax = max |x|; d = amax / 127;
    id = d ? 1/d : 0; y.d = fp16(d); y.qs[j] = roundf(x[j] * id) (half away from zero)."""
    b = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, 32)
    amax = np.abs(b).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = (b * inv[:, None]).astype(np.float32).astype(np.float64)
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)
    return d.astype(np.float16), q


def dequantize_q8_0(d, q):
    """dequantize_row_q8_0 (same file): y = qs[j] * fp32(d), in float."""
    return (q.astype(np.float32) * d.astype(np.float32)[:, None]).astype(np.float32).reshape(-1)


def random_model(family, dtype, seed=3):
    """HF tensors (name -> float32 array, values representable in `dtype`) and config.json."""
    rng = np.random.default_rng(seed)
    D, F, L, NH, NKV = 64, 96, 2, 4, 2
    HD = 32 if family == "qwen3" else D // NH
    tok = tiny_tokenizer("llama-bpe" if family == "llama" else "qwen2")
    V = len(tok["model"]["vocab"]) + 1 + 3  # + the added token + 3 padding ids
    cfg = {"model_type": family, "hidden_size": D, "intermediate_size": F, "num_hidden_layers": L,
           "num_attention_heads": NH, "num_key_value_heads": NKV, "vocab_size": V,
           "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0 if family != "qwen2" else 1e6,
           "tie_word_embeddings": family == "qwen3", "hidden_act": "silu"}
    if family == "qwen3":
        cfg["head_dim"] = HD
    if family == "llama":
        cfg["bos_token_id"] = V - 4  # the added token
    t = {}

    def mat(name, rows, cols):
        t[name] = round_to(rng.normal(0, 0.5 / np.sqrt(cols), (rows, cols)).astype(np.float32), dtype).reshape(rows, cols)

    def vec(name, n, mean=0.0):
        t[name] = (mean + rng.normal(0, 0.1, n)).astype(np.float32)

    mat("model.embed_tokens.weight", V, D)
    for i in range(L):
        p = f"model.layers.{i}."
        vec(p + "input_layernorm.weight", D, 1.0)
        vec(p + "post_attention_layernorm.weight", D, 1.0)
        mat(p + "self_attn.q_proj.weight", NH * HD, D)
        mat(p + "self_attn.k_proj.weight", NKV * HD, D)
        mat(p + "self_attn.v_proj.weight", NKV * HD, D)
        mat(p + "self_attn.o_proj.weight", D, NH * HD)
        if family == "qwen2":
            vec(p + "self_attn.q_proj.bias", NH * HD)
            vec(p + "self_attn.k_proj.bias", NKV * HD)
            vec(p + "self_attn.v_proj.bias", NKV * HD)
        if family == "qwen3":
            vec(p + "self_attn.q_norm.weight", HD, 1.0)
            vec(p + "self_attn.k_norm.weight", HD, 1.0)
        mat(p + "mlp.gate_proj.weight", F, D)
        mat(p + "mlp.up_proj.weight", F, D)
        mat(p + "mlp.down_proj.weight", D, F)
    vec("model.norm.weight", D, 1.0)
    if not cfg["tie_word_embeddings"]:
        mat("lm_head.weight", V, D)
    return cfg, tok, t


def write_safetensors(path, tensors, dtype):
    """Matrices in `dtype` (F32 for Q8_0: the dequantised values), vectors in F32."""
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        st = dtype if a.ndim == 2 and dtype in ("F16", "BF16") else "F32"
        data = (a.astype(np.float16).tobytes() if st == "F16" else to_bf16_bits(a).tobytes() if st == "BF16"
                else a.astype("<f4").tobytes())
        header[name] = {"dtype": st, "shape": list(a.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# --- GGUF side (from the specification) --------------------------------------------------------

GGML = {"F32": 0, "F16": 1, "Q8_0": 8, "BF16": 30}
U8, I8, U16, I16, U32, I32, F32T, BOOL, STR, ARR, U64, I64, F64 = range(13)


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gval(vtype, v):
    fmt = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32T: "<f", BOOL: "<?", U64: "<Q",
           I64: "<q", F64: "<d"}
    if vtype == STR:
        return gstr(v)
    if vtype == ARR:
        etype, items = v
        return struct.pack("<IQ", etype, len(items)) + b"".join(gval(etype, x) for x in items)
    return struct.pack(fmt[vtype], v)


def write_gguf(path, kv, tensors, alignment=32, version=3):
    """kv: [(key, type, value)]; tensors: [(name, ggml type name, ne list, bytes)]."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv)))
    for k, t, v in kv:
        out += gstr(k) + struct.pack("<I", t) + gval(t, v)
    off, datas = 0, []
    for name, ty, ne, data in tensors:
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", GGML[ty], off)
        datas.append(data + b"\0" * (-len(data) % alignment))
        off += len(datas[-1])
    out += b"\0" * (-len(out) % alignment)
    path.write_bytes(bytes(out) + b"".join(datas))


def permute(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute (llama.cpp@a458664f): the rotate-half pairs of
    each head become interleaved pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def tensor_bytes(a, ty):
    if ty == "F32":
        return a.astype("<f4").tobytes()
    if ty == "F16":
        return a.astype("<f2").tobytes()
    if ty == "BF16":
        return to_bf16_bits(a).astype("<u2").tobytes()
    d, q = quantize_q8_0(a)
    return b"".join(d[i:i + 1].astype("<f2").tobytes() + q[i].tobytes() for i in range(len(d)))


GGUF_NAMES = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
              "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
              "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
              "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
              "self_attn.v_proj.bias": "attn_v.bias", "self_attn.q_norm.weight": "attn_q_norm.weight",
              "self_attn.k_norm.weight": "attn_k_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
              "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}


def convert(cfg, tok, tensors, dtype, hf_tensors=None):
    """(kv, tensors) of the GGUF llama.cpp's converter writes for this checkpoint. `tensors`
    are the values to store before quantisation (Q8_0 is quantised here)."""
    fam = cfg["model_type"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", cfg["hidden_size"] // nh)
    out = []
    for name, a in tensors.items():
        if name == "model.embed_tokens.weight":
            g = "token_embd.weight"
        elif name == "model.norm.weight":
            g = "output_norm.weight"
        elif name == "lm_head.weight":
            g = "output.weight"
        else:
            i, rest = name[len("model.layers."):].split(".", 1)
            g = f"blk.{i}.{GGUF_NAMES[rest]}"
        if fam == "llama" and rest_is(name, "q_proj"):
            a = permute(a, nh)
        if fam == "llama" and rest_is(name, "k_proj"):
            a = permute(a, nkv)
        ty = dtype if a.ndim == 2 else "F32"
        out.append((g, ty, list(a.shape[::-1]), tensor_bytes(a, ty)))
    vocab = sorted(list(tok["model"]["vocab"].items()) + [(t["content"], t["id"]) for t in tok["added_tokens"]],
                   key=lambda p: p[1])
    added = {t["id"] for t in tok["added_tokens"]}
    tokens = [p for p, _ in vocab]
    types = [3 if i in added else 1 for i in range(len(tokens))]
    for i in range(len(tokens), cfg["vocab_size"]):  # convert pads the vocabulary with unused [PAD{i}]
        tokens.append(f"[PAD{i}]")
        types.append(5)
    a = fam + "."
    kv = [("general.architecture", STR, fam), ("general.name", STR, "tiny"), ("general.file_type", U32, 1),
          (a + "block_count", U32, cfg["num_hidden_layers"]), (a + "context_length", U32, cfg["max_position_embeddings"]),
          (a + "embedding_length", U32, cfg["hidden_size"]), (a + "feed_forward_length", U32, cfg["intermediate_size"]),
          (a + "attention.head_count", U32, nh), (a + "attention.head_count_kv", U32, nkv),
          (a + "rope.freq_base", F32T, cfg["rope_theta"]),
          (a + "attention.layer_norm_rms_epsilon", F32T, cfg["rms_norm_eps"]),
          ("general.quantization_version", U32, 2),
          ("tokenizer.ggml.model", STR, "gpt2"), ("tokenizer.ggml.pre", STR, "llama-bpe" if fam == "llama" else "qwen2"),
          ("tokenizer.ggml.tokens", ARR, (STR, tokens)), ("tokenizer.ggml.token_type", ARR, (I32, types)),
          ("tokenizer.ggml.merges", ARR, (STR, tok["model"]["merges"])),
          ("tokenizer.ggml.eos_token_id", U32, len(vocab) - 1),
          ("tokenizer.ggml.bos_token_id", U32, len(vocab) - 1),
          ("tokenizer.ggml.add_bos_token", BOOL, fam == "llama"),
          ("tokenizer.chat_template", STR, "{{ messages }}")]
    if fam == "llama":
        kv += [(a + "vocab_size", U32, cfg["vocab_size"]), (a + "rope.dimension_count", U32, hd)]
    if fam == "qwen3":
        kv += [(a + "attention.key_length", U32, hd), (a + "attention.value_length", U32, hd)]
    return kv, out


def rest_is(name, proj):
    return f"self_attn.{proj}." in name


def make_pair(tmp_path, family, dtype):
    """The HF folder (weights as the GGUF's dequantised values) and the GGUF file."""
    cfg, tok, t = random_model(family, dtype)
    hf = tmp_path / f"{family}-{dtype}-hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps(cfg))
    (hf / "tokenizer.json").write_text(json.dumps(tok))
    write_safetensors(hf / "model.safetensors", t, dtype)
    kv, tensors = convert(cfg, tok, t, dtype)
    gg = tmp_path / f"{family}-{dtype}.gguf"
    write_gguf(gg, kv, tensors)
    return hf, gg, kv, tensors


def loss(model, text, extra=()):
    return cli("--quiet", "loss", "--model", model, "--text", text, "--tokens", "48", "--conditions", "plain",
               "--kernel", "fa3", "--linear-precision", "fp32", *extra, "--json", json_out=True)


def read_safetensors(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    return {k: raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}


@pytest.mark.parametrize("family,dtype", [("llama", "F32"), ("llama", "F16"), ("llama", "BF16"), ("llama", "Q8_0"),
                                          ("qwen2", "F32"), ("qwen2", "Q8_0"), ("qwen3", "BF16"), ("qwen3", "Q8_0")])
def test_gguf_gives_the_hf_folders_loss_and_captures(tmp_path, attnum_cli, family, dtype):
    hf, gg, _, _ = make_pair(tmp_path, family, dtype)
    text = tmp_path / "text.txt"
    text.write_text(TEXT)
    a, b = loss(hf, text), loss(gg, text)
    assert len(a) == len(b) == 1
    assert a[0]["n_labels"] == 48
    # Every number (ce_ref, ce_variant, the ratio and its interval, ...) equal; only the name differs.
    assert {k: v for k, v in a[0].items() if k != "model"} == {k: v for k, v in b[0].items() if k != "model"}
    # The tokenizer stored in the GGUF splits the text into the tokenizer.json's ids: the same
    # captures (q/k/v of every layer, post-RoPE) bit for bit.
    for m, d in ((hf, "c_hf"), (gg, "c_gg")):
        cli("--quiet", "capture", "--model", m, "--text", text, "--tokens", "40", "--linear-precision", "fp32",
            "--out", tmp_path / d)
    (ca,), (cb,) = list((tmp_path / "c_hf").glob("*.safetensors")), list((tmp_path / "c_gg").glob("*.safetensors"))
    ta, tb = read_safetensors(ca), read_safetensors(cb)
    assert sorted(ta) == sorted(tb) and len(ta) == 6
    for k in ta:
        assert ta[k] == tb[k], k


def test_q8_0_is_not_a_no_op(tmp_path, attnum_cli):
    """The Q8_0 comparison is against the dequantised weights: the original float32 weights give
    another loss (the quantisation is visible, so the equality above is not vacuous)."""
    cfg, tok, t = random_model("qwen2", "F32")
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps(cfg))
    (hf / "tokenizer.json").write_text(json.dumps(tok))
    write_safetensors(hf / "model.safetensors", t, "F32")
    kv, tensors = convert(cfg, tok, t, "Q8_0")
    write_gguf(tmp_path / "m.gguf", kv, tensors)
    text = tmp_path / "text.txt"
    text.write_text(TEXT)
    assert loss(hf, text)[0]["ce_ref"] != loss(tmp_path / "m.gguf", text)[0]["ce_ref"]


def test_llama_without_unpermuting_would_differ(tmp_path, attnum_cli):
    """Writing llama's q/k unpermuted (as qwen2 is) changes the loss: the reader's un-permutation
    is what makes the llama GGUF equal to its folder."""
    hf, gg, kv, tensors = make_pair(tmp_path, "llama", "F32")
    cfg, tok, t = random_model("llama", "F32")
    plain = dict(t)
    kv2, tensors2 = convert(dict(cfg, model_type="qwen2"), tok, plain, "F32")  # no permutation
    names = {n for n, *_ in tensors}
    write_gguf(tmp_path / "unpermuted.gguf", kv, [x for x in tensors2 if x[0] in names])
    text = tmp_path / "text.txt"
    text.write_text(TEXT)
    assert loss(hf, text)[0]["ce_ref"] == loss(gg, text)[0]["ce_ref"]
    assert loss(hf, text)[0]["ce_ref"] != loss(tmp_path / "unpermuted.gguf", text)[0]["ce_ref"]


# --- malformed and unsupported files -----------------------------------------------------------


def run_bad(path, tmp_path):
    text = tmp_path / "text.txt"
    text.write_text(TEXT)
    r = subprocess.run([BINARY, "--quiet", "capture", "--model", str(path), "--text", str(text), "--tokens", "8",
                        "--out", str(tmp_path / "bad_out")], capture_output=True, text=True)
    assert not (tmp_path / "bad_out").exists() or not any((tmp_path / "bad_out").iterdir())
    return r


def edit_kv(kv, key, value=None, vtype=None, drop=False):
    out = [x for x in kv if x[0] != key]
    if not drop:
        old = [x for x in kv if x[0] == key]
        out.append((key, vtype if vtype is not None else old[0][1], value))
    return out


@pytest.mark.parametrize("case,expect", [
    ("magic", "magic: expected \"GGUF\""),
    ("version1", "version 1"),
    ("version9", "version 9"),
    ("truncated_header", "not a valid GGUF file"),
    ("huge_tensor_count", "tensor_count"),
    ("huge_array", "array count"),
    ("huge_string", "length"),
    ("truncated_data", "past the end of the data section"),
    ("misaligned", "not a multiple of general.alignment"),
    ("bad_alignment", "general.alignment"),
    ("q4_0", "type Q4_0: not supported"),
    ("unknown_type", "type 99: not supported"),
    ("arch", "general.architecture 'gpt2' not supported"),
    ("unknown_key", "metadata key llama.attention.sliding_window is not supported"),
    ("rope_yarn", "rope.scaling.type 'yarn' not supported"),
    ("extra_tensor", "tensor blk.0.attn_qkv.weight is not read"),
    ("wrong_shape", "tensor blk.0.attn_k.weight has ne"),
    ("missing_key", "missing metadata key llama.embedding_length"),
    ("wrong_key_type", "metadata llama.block_count has type string"),
    ("huge_block_count", "llama.block_count = 2147483647: the file holds"),
    ("spm", "missing metadata key tokenizer.ggml.scores"),
    ("spm_no_byte_token", "tokenizer.ggml.tokens: no token <0xE2> (nor the byte itself)"),
    ("pre", "tokenizer.ggml.pre 'deepseek-llm' not supported"),
    ("dims", "n_dims 5"),
    ("zero_dim", "ne[1] = 0"),
    ("duplicate_tensor", "duplicate tensor"),
    ("overlap", "overlaps"),
])
def test_malformed_and_unsupported_files_exit_2_naming_the_field(tmp_path, attnum_cli, case, expect):
    cfg, tok, t = random_model("llama", "F32")
    kv, tensors = convert(cfg, tok, t, "F32")
    p = tmp_path / "bad.gguf"
    if case == "arch":
        kv = edit_kv(kv, "general.architecture", "gpt2")
    elif case == "unknown_key":
        kv = kv + [("llama.attention.sliding_window", U32, 16)]
    elif case == "rope_yarn":
        kv = kv + [("llama.rope.scaling.type", STR, "yarn")]
    elif case == "missing_key":
        kv = edit_kv(kv, "llama.embedding_length", drop=True)
    elif case == "wrong_key_type":
        kv = edit_kv(kv, "llama.block_count", "2", STR)
    elif case == "huge_block_count":  # the fuzzer's: sized per-layer state before any tensor was read
        kv = edit_kv(kv, "llama.block_count", 2147483647, U32)
    elif case == "spm":
        kv = edit_kv(kv, "tokenizer.ggml.model", "llama")
    elif case == "spm_no_byte_token":
        # SentencePiece escapes spaces to U+2581, which this byte-level vocabulary has neither as
        # a token nor as <0xE2> byte tokens.
        n = len(next(x for x in kv if x[0] == "tokenizer.ggml.tokens")[2][1])
        kv = edit_kv(kv, "tokenizer.ggml.model", "llama") + [("tokenizer.ggml.scores", ARR, (F32T, [0.0] * n))]
    elif case == "pre":
        kv = edit_kv(kv, "tokenizer.ggml.pre", "deepseek-llm")
    elif case == "bad_alignment":
        kv = kv + [("general.alignment", U32, 24)]
    elif case == "q4_0":
        GGML["Q4_0"] = 2
        tensors[1] = (tensors[1][0], "Q4_0") + tensors[1][2:]
    elif case == "unknown_type":
        GGML["X"] = 99
        tensors[1] = (tensors[1][0], "X") + tensors[1][2:]
    elif case == "extra_tensor":
        tensors = tensors + [("blk.0.attn_qkv.weight", "F32", [4], b"\0" * 16)]
    elif case == "wrong_shape":
        n, ty, ne, data = next(x for x in tensors if x[0] == "blk.0.attn_k.weight")
        tensors = [x if x[0] != n else (n, ty, [ne[1], ne[0]], data) for x in tensors]
    elif case == "dims":
        tensors[0] = (tensors[0][0], "F32", [1, 1, 1, 1, len(tensors[0][3]) // 4], tensors[0][3])
    elif case == "zero_dim":
        tensors[0] = (tensors[0][0], "F32", [tensors[0][2][0], 0], tensors[0][3])
    elif case == "duplicate_tensor":
        tensors = tensors + [tensors[0]]
    write_gguf(p, kv, tensors)
    raw = bytearray(p.read_bytes())
    header_end = len(raw) - sum(len(x[3]) + (-len(x[3]) % 32) for x in tensors)
    if case == "magic":
        raw[:4] = b"GGML"
    elif case == "version1":
        raw[4:8] = struct.pack("<I", 1)
    elif case == "version9":
        raw[4:8] = struct.pack("<I", 9)
    elif case == "truncated_header":
        raw = raw[:header_end // 2]
    elif case == "huge_tensor_count":
        raw[8:16] = struct.pack("<Q", 1 << 60)
    elif case == "huge_array":
        i = raw.find(gstr("tokenizer.ggml.tokens")) + len(gstr("tokenizer.ggml.tokens")) + 8
        raw[i:i + 8] = struct.pack("<Q", 1 << 40)
    elif case == "huge_string":
        i = raw.find(gstr("general.name"))
        raw[i + 8 + len("general.name") + 4:i + 8 + len("general.name") + 12] = struct.pack("<Q", 1 << 50)
    elif case == "truncated_data":
        raw = raw[:-100]
    elif case in ("misaligned", "overlap"):
        # The offset of the second tensor info: after its name, n_dims, ne and type.
        name = gstr(tensors[1][0])
        i = raw.find(name) + len(name) + 4 + 8 * len(tensors[1][2]) + 4
        (off,) = struct.unpack("<Q", raw[i:i + 8])
        raw[i:i + 8] = struct.pack("<Q", off + 4 if case == "misaligned" else 0)
    p.write_bytes(bytes(raw))
    GGML.pop("Q4_0", None), GGML.pop("X", None)
    r = run_bad(p, tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert expect in r.stderr and "bad.gguf" in r.stderr, r.stderr


def test_llama3_rope_freqs_tensor_matches_the_folders_rope_scaling(tmp_path, attnum_cli):
    """llama 3 rope_scaling comes in a GGUF as the tensor rope_freqs.weight, the per-pair factors
    convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors writes (factor below the low
    wavelength, 1 above the high one, 1 / ((1 - s) / factor + s) between; stored in fp32). The
    factors are rounded to fp32, so the loss agrees to rounding, far closer than without them."""
    cfg, tok, t = random_model("llama", "F32")
    rs = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}
    dirs = {}
    for name, c in (("scaled", dict(cfg, rope_scaling=rs)), ("plain", cfg)):
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text(json.dumps(c))
        (d / "tokenizer.json").write_text(json.dumps(tok))
        write_safetensors(d / "model.safetensors", t, "F32")
        dirs[name] = d
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    freqs = 1.0 / cfg["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    factors = []
    for f in freqs:
        wavelen = 2 * np.pi / f
        if wavelen < 64 / rs["high_freq_factor"]:
            factors.append(1.0)
        elif wavelen > 64 / rs["low_freq_factor"]:
            factors.append(rs["factor"])
        else:
            s = (64 / wavelen - rs["low_freq_factor"]) / (rs["high_freq_factor"] - rs["low_freq_factor"])
            factors.append(1 / ((1 - s) / rs["factor"] + s))
    assert len(set(factors)) >= 3  # every band is exercised
    kv, tensors = convert(cfg, tok, t, "F32")
    ff = np.array(factors, dtype=np.float32)
    write_gguf(tmp_path / "m.gguf", kv, tensors + [("rope_freqs.weight", "F32", [len(ff)], ff.tobytes())])
    text = tmp_path / "text.txt"
    text.write_text(TEXT)
    ce = {k: loss(d, text)[0]["ce_ref"] for k, d in dirs.items()}
    got = loss(tmp_path / "m.gguf", text)[0]["ce_ref"]
    assert abs(got - ce["scaled"]) <= 1e-5 * abs(ce["scaled"])
    assert abs(ce["plain"] - ce["scaled"]) > 100 * max(abs(got - ce["scaled"]), 1e-12)


# --- SentencePiece vocabulary (tokenizer.ggml.model llama) --------------------------------------


def spm_oracle(text, pieces, scores):
    """llama.cpp's SPM tokenize (ggml-org/llama.cpp@c392e5094 src/llama-vocab.cpp:2329-2362:
    add_special false, a space prefix, spaces escaped to U+2581; llm_tokenizer_spm_session
    :110-233: bigrams whose text is a token, highest score first, leftmost on ties; symbols that are
    no token as their <0xXX> byte tokens, byte_to_token :2783-2800). Inputs here are valid UTF-8
    without user-defined tokens."""
    ids = {p: i for i, p in enumerate(pieces)}
    s = ("\u2581" + text.replace(" ", "\u2581"))
    sym = [[c, i - 1, i + 1 if i + 1 < len(s) else -1] for i, c in enumerate(s)]  # text, prev, next
    heap = []

    def add(left, right):
        if left == -1 or right == -1:
            return
        t = sym[left][0] + sym[right][0]
        if t in ids:
            heapq.heappush(heap, (-scores[ids[t]], left, right, t))

    for i in range(1, len(sym)):
        add(i - 1, i)
    while heap:
        _, left, right, t = heapq.heappop(heap)
        if not sym[left][0] or not sym[right][0] or sym[left][0] + sym[right][0] != t:
            continue
        sym[left][0], sym[right][0] = t, ""
        sym[left][2] = sym[right][2]
        if sym[right][2] >= 0:
            sym[sym[right][2]][1] = left
        add(sym[left][1], left)
        add(left, sym[left][2])
    out, i = [], 0
    while i != -1:
        t = sym[i][0]
        out += [ids[t]] if t in ids else [ids[f"<0x{b:02X}>"] for b in t.encode()]
        i = sym[i][2]
    return out


def test_spm_vocabulary_tokenizes_as_llama_cpp_with_bos(tmp_path, attnum_cli):
    """A llama GGUF with a SentencePiece vocabulary: `loss --text` equals `loss --token-ids` with
    BOS (id 1: add_bos_token) and the oracle's ids; characters outside the pieces (capitals,
    digits, the newline) take the byte fallback."""
    cfg, tok, t = random_model("llama", "F32")
    kv, tensors = convert(cfg, tok, t, "F32")
    words = ["\u2581", "t", "h", "e", "o", "a", "n", "r", "s", "d", "th", "he", "\u2581t", "\u2581the", "\u2581a", "an",
             "and", "\u2581and", "er", "re", "in", "is", "\u2581is", "on", "en", "nd"]
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + words
    scores = [0.0] * 259 + [-1.0 - 0.37 * ((7 * i) % len(words)) for i in range(len(words))]
    types = [2, 3, 3] + [6] * 256 + [1] * len(words)
    assert len(pieces) <= cfg["vocab_size"]
    for key in ("tokenizer.ggml.merges", "tokenizer.ggml.pre", "tokenizer.ggml.bos_token_id",
                "tokenizer.ggml.add_bos_token"):
        kv = edit_kv(kv, key, drop=True)
    kv = edit_kv(kv, "tokenizer.ggml.model", "llama")
    kv = edit_kv(kv, "tokenizer.ggml.tokens", (STR, pieces))
    kv = edit_kv(kv, "tokenizer.ggml.token_type", (I32, types))
    kv += [("tokenizer.ggml.scores", ARR, (F32T, scores))]  # add_bos_token absent: true for SPM, BOS id 1
    gg = tmp_path / "spm.gguf"
    write_gguf(gg, kv, tensors)
    text = tmp_path / "text.txt"
    text.write_text(TEXT)
    want = spm_oracle(TEXT, pieces, scores)
    assert len(want) > 60 and 3 + ord("\n") in want and pieces.index("\u2581the") in want
    ids = tmp_path / "ids.txt"
    ids.write_text(" ".join(map(str, [1] + want)))
    a = loss(gg, text)
    b = cli("--quiet", "loss", "--model", gg, "--token-ids", ids, "--tokens", "48", "--conditions", "plain",
            "--kernel", "fa3", "--linear-precision", "fp32", "--json", json_out=True)
    assert len(a) == len(b) == 1 and a[0]["n_labels"] == 48
    assert a[0]["ce_ref"] == b[0]["ce_ref"] and a[0]["ce_variant"] == b[0]["ce_variant"]
    # Without BOS the first window differs.
    ids.write_text(" ".join(map(str, want)))
    c = cli("--quiet", "loss", "--model", gg, "--token-ids", ids, "--tokens", "48", "--conditions", "plain",
            "--kernel", "fa3", "--linear-precision", "fp32", "--json", json_out=True)
    assert c[0]["ce_ref"] != a[0]["ce_ref"]

// Writes the tokenizer.json fixtures data/tokenizer/hf-<name>.json (tiny vocabularies authored
// here), the inputs data/tokenizer/hf.inp, and data/tokenizer/hf-<name>.out: the ids that the
// Hugging Face tokenizers library itself (the Rust crate, 0.22, through the Node binding of npm
// @anush008/tokenizers 0.6.0, an implementation independent of attnum's) gives for each input;
// and data/tokenizer/hf-word-space.txt: the code points that its Whitespace pre-tokenizer treats
// as word characters (\w of the Rust regex crate) and as whitespace (\s), as ranges.
//   node tests/model/hf_tokenizers_oracle.cjs   (from the repository root, after npm ci)
// tests/model/tokenizer_hf_fixtures_golden_test.cpp compares attnum's ids with these, bit for bit.
"use strict";
const { writeFileSync } = require("node:fs");
const { Tokenizer, whitespacePreTokenizer } = require("@anush008/tokenizers");

// The base vocabulary: [UNK], lower-case letters, digits, a little punctuation and a few
// non-ASCII letters; the rest of the text becomes [UNK].
const chars = [..."abcdefghijklmnopqrstuvwxyz0123456789.,!?-'_", "é", "ü", "中", "文", "Ⓐ", "▁", "<", ">", "/"];
function vocabOf(pieces) {
  const v = { "[UNK]": 0 };
  for (const p of pieces) if (!(p in v)) v[p] = Object.keys(v).length;
  return v;
}
function bpe(vocab, merges, extra = {}) {
  return {
    type: "BPE", dropout: null, unk_token: "[UNK]", continuing_subword_prefix: null, end_of_word_suffix: null,
    fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges, ...extra,
  };
}
function tokenizerJson(model, pre_tokenizer, normalizer = null, added_tokens = []) {
  return { version: "1.0", truncation: null, padding: null, added_tokens, normalizer, pre_tokenizer,
           post_processor: null, decoder: null, model };
}
// Plain merges: "th", "the", "in", "ing", "an", "and", "er", "中文".
const plainMerges = [["t", "h"], ["th", "e"], ["i", "n"], ["in", "g"], ["a", "n"], ["an", "d"], ["e", "r"], ["中", "文"]];
const plainVocab = vocabOf([...chars, ...plainMerges.map(([a, b]) => a + b)]);
const ws = { type: "Whitespace" };
const wss = { type: "WhitespaceSplit" };

// continuing_subword_prefix "##": every character also as "##c"; a merge's right side carries the
// prefix, its result drops the right side's (models/bpe/model.rs, from_builder).
const prefixMerges = [["t", "##h"], ["th", "##e"], ["##i", "##n"], ["##in", "##g"], ["a", "##n"], ["an", "##d"],
                      ["##e", "##r"], ["i", "##n"]];
const prefixVocab = vocabOf([...chars, ...chars.map((c) => "##" + c), "th", "the", "##in", "##ing", "an", "and",
                             "##er", "in"]);
// end_of_word_suffix "</w>": every character also as "c</w>".
const suffixMerges = [["t", "h"], ["th", "e</w>"], ["i", "n"], ["in", "g</w>"], ["a", "n"], ["an", "d</w>"],
                      ["e", "r</w>"], ["e", "r"]];
const suffixVocab = vocabOf([...chars, ...chars.map((c) => c + "</w>"), "th", "the</w>", "in", "ing</w>", "an",
                             "and</w>", "er</w>", "er"]);
// Both: the last character of a word of two or more is "##c</w>".
const bothMerges = [["t", "##h"], ["th", "##e</w>"], ["##i", "##n"], ["##in", "##g</w>"], ["a", "##n</w>"]];
const bothVocab = vocabOf([...chars, ...chars.map((c) => "##" + c), ...chars.map((c) => c + "</w>"),
                           ...chars.map((c) => "##" + c + "</w>"), "th", "the</w>", "##in", "##ing</w>", "an</w>"]);

// Added tokens: ids follow the vocabulary (the library gives an added token outside the vocabulary
// the next free id, whatever the file says).
function added(vocab, list) {
  let id = Object.keys(vocab).length;
  return list.map(([content, normalized, special]) => ({
    id: id++, content, single_word: false, lstrip: false, rstrip: false, normalized, special,
  }));
}
const spmNormalizer = { type: "Sequence", normalizers: [
  { type: "NFKC" }, { type: "Prepend", prepend: "▁" }, { type: "Replace", pattern: { String: " " }, content: "▁" }] };

const fixtures = {
  whitespace: tokenizerJson(bpe(plainVocab, plainMerges), ws),
  "whitespace-split": tokenizerJson(bpe(plainVocab, plainMerges), wss),
  "sequence-digits-whitespace": tokenizerJson(bpe(plainVocab, plainMerges),
    { type: "Sequence", pretokenizers: [{ type: "Digits", individual_digits: true }, ws] }),
  "sequence-split-whitespace-split": tokenizerJson(bpe(plainVocab, plainMerges),
    { type: "Sequence", pretokenizers: [
      { type: "Split", pattern: { String: "-" }, behavior: "Isolated", invert: false }, wss] }),
  "sequence-whitespace-split-metaspace": tokenizerJson(bpe(plainVocab, plainMerges),
    { type: "Sequence", pretokenizers: [wss,
      { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true }] }),
  // normalized: true matches the token's normalized form in the normalized text; false the raw
  // text (tokenizer/added_vocabulary.rs, extract_and_normalize).
  "added-normalized": tokenizerJson(bpe(plainVocab, plainMerges), null, spmNormalizer, added(plainVocab, [
    ["</s>", true, false], ["<s>", false, true], ["ﬁx", true, false], ["a b", true, false], ["end", true, false],
    ["<raw>", false, false]])),
  "added-normalized-whitespace": tokenizerJson(bpe(plainVocab, plainMerges), ws, { type: "NFKC" },
    added(plainVocab, [["ﬁx", true, false], ["Ⅷ", true, false], ["x y", true, false], ["<b>", false, true]])),
  prefix: tokenizerJson(bpe(prefixVocab, prefixMerges, { continuing_subword_prefix: "##" }), ws),
  suffix: tokenizerJson(bpe(suffixVocab, suffixMerges, { end_of_word_suffix: "</w>" }), ws),
  "prefix-suffix": tokenizerJson(bpe(bothVocab, bothMerges,
    { continuing_subword_prefix: "##", end_of_word_suffix: "</w>" }), wss),
  "prefix-byte-fallback": tokenizerJson(bpe({ ...prefixVocab, "<0x23>": 9000, "<0xC3>": 9001, "<0xA9>": 9002,
    "<0xE2>": 9003, "<0x82>": 9004, "<0xAC>": 9005 }, prefixMerges,
    { continuing_subword_prefix: "##", byte_fallback: true, fuse_unk: true }), ws),
};

const inputs = [
  "the thing and the end",
  "  leading and trailing  ",
  "",
  " ",
  "\n\t\r\u000b\u000c",
  "Hello, World! It's 2024-01-31; done.",
  "the-end -- x-y",
  "under_score snake_case __x__",
  "thin, thing; things...",
  "caf\u00e9 \u00fcber na\u00efve",
  "\u4e2d\u6587 \u4e2d\u6587\u4e2d",
  "nbsp\u00a0nel\u0085ideo\u3000line\u2028para\u2029thin\u2009zw\u200bbom\ufeffend",
  "join\u200dzwnj\u200cx",
  "circled \u24b6\u24d0 squared \ud83c\udd30 roman \u2167\u2170 digits \u0663\u0664 \u00b2\u00bd",
  "a\u0301b combining e\u0301",
  "emoji \ud83d\ude00\ud83d\ude80 and \u2764\ufe0f!",
  "</s>the end</s>",
  "the</s> <s>the<s>",
  "fix \ufb01x \ufb01xer a b a  b ab",
  "end ending the end",
  "<raw> <RAW> < raw >",
  "x y x  y \u2167 \u2160\u2160\u2160 <b>x<b>",
  "\u20ac\u00e9 th\u00e9",
  "mixed123numbers 4567 x8y9",
];

function wordSpaceRanges() {
  // Whitespace on "a" + c + "a": one piece when c is a word character, two when it is
  // whitespace, three otherwise.
  const pt = whitespacePreTokenizer();
  const ranges = [];
  for (let cp = 0; cp <= 0x10ffff; ++cp) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const n = pt.preTokenizeString("a" + String.fromCodePoint(cp) + "a").length;
    const k = n === 1 ? "W" : n === 2 ? "S" : null;
    const last = ranges[ranges.length - 1];
    if (k && last && last[0] === k && last[2] === cp - 1) last[2] = cp;
    else if (k) ranges.push([k, cp, cp]);
  }
  return ranges.map(([k, a, b]) => `${k} ${a.toString(16).toUpperCase()} ${b.toString(16).toUpperCase()}`);
}

(async () => {
  const sep = "\n__ggml_vocab_test__\n";
  writeFileSync("data/tokenizer/hf.inp", inputs.map((t) => t + sep).join(""));
  for (const [name, j] of Object.entries(fixtures)) {
    const text = JSON.stringify(j, null, 1) + "\n";
    writeFileSync(`data/tokenizer/hf-${name}.json`, text);
    const tok = Tokenizer.fromString(text);
    const lines = [];
    for (const t of inputs) lines.push((await tok.encode(t, null, { addSpecialTokens: false })).getIds().join(" "));
    writeFileSync(`data/tokenizer/hf-${name}.out`, lines.join("\n") + "\n");
  }
  writeFileSync("data/tokenizer/hf-word-space.txt",
    "# Rust regex \\w (W) and \\s (S) as the tokenizers library's Whitespace pre-tokenizer sees them:\n" +
    "# kind, first and last code point (hex). Written by tests/model/hf_tokenizers_oracle.cjs.\n" +
    wordSpaceRanges().join("\n") + "\n");
})();

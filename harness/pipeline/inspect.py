"""Answers to everyday questions, as lines for people: which shapes may the engine use, what is
in a golden, what happened to a shape."""

from __future__ import annotations

from golden.store import Golden


def describe_golden(gold: Golden) -> list[str]:
    m = gold.manifest
    model, env, corpus, repro = m["model"], m["environment"], m["corpus"], m["reproducibility"]
    lines = [
        f"golden {gold.golden_id} (release {gold.release}), recorded {m['created']}, format {m['format']}",
        f"  model: {model.get('name', '?')}, fingerprint {gold.fingerprint}",
        f"  device: {gold.device_kind}; numerics profile {m['numerics_profile']} "
        f"(threads {m['numerics']['in_force'].get('threads')}, mkldnn {m['numerics']['in_force'].get('mkldnn')}, "
        f"tf32 {m['numerics']['in_force'].get('matmul_allow_tf32')})",
        f"  environment: torch {env.get('torch')}, numpy {env.get('numpy')}, CUDA {env.get('cuda')}, "
        f"cuDNN {env.get('cudnn')}, CPU {env.get('cpu')}",
        f"  corpus: {corpus['blocks']} blocks, {corpus['audio_windows']} audio windows ({corpus['short_windows']} "
        f"short, {corpus['padding_windows']} padding), {corpus['span_seconds']} s of audio, sources "
        f"{', '.join(corpus['sources'])}",
        f"  voiceprint inputs: {m['mode']}; OPs {', '.join(str(o) for o in m['ops'])}",
        f"  reproduction when recorded: {'bitwise' if repro['bitwise'] else 'NOT bitwise'} "
        f"({repro['repeats']} interleaved exact-lane runs)",
    ]
    for op, f in sorted(repro["ops"].items()):
        floor = "bitwise" if f["bitwise"] else f"noise floor max_abs {f['max_abs']:.3g}, max_ulp {f['max_ulp']}" + (
            f", min cosine {f['min_cosine']:.9g}" if f.get("min_cosine") is not None else "")
        lines.append(f"    OP {op}: {floor}")
    size = sum(e["bytes"] for e in m["files"].values())
    lines.append(f"  files: {len(m['files'])}, {size / 2**20:.1f} MiB (sha256 of each in the manifest)")
    return lines


def describe_shapes(manifest: dict) -> list[str]:
    """Per model, device kind and numerics profile: which k the engine may use per OP, since when, by which run."""
    lines = [f"promoted-shapes manifest: ledger commit {manifest['ledger_seq']}, generated {manifest['generated']}"]
    if not manifest["models"]:
        lines.append("  no shape recorded yet: the engine may use only the release's own shapes")
    for fp, model in sorted(manifest["models"].items()):
        for device, dev in sorted(model["devices"].items()):
            for profile, p in sorted(dev["profiles"].items()):
                n = p["numerics"]
                lines.append(f"model {fp[:16]}... on {device}, numerics {profile} (threads {n.get('threads')}, "
                             f"mkldnn {n.get('mkldnn')}, tf32 {n.get('matmul_allow_tf32')}, cudnn benchmark "
                             f"{n.get('cudnn_benchmark')}), release {p['release']}:")
                for op, ks in sorted(p["ops"].items()):
                    lines.append(f"  OP {op}: k = {', '.join(str(k) for k in ks)}")
                for k, ev in sorted(p["evidence"].items(), key=lambda kv: int(kv[0])):
                    lines.append(f"  k={k}: promoted {ev['promoted_at']} by run {ev['run_id']} against "
                                 f"{ev['golden_id']} ({ev['corpus_blocks']} blocks)")
    return lines


def describe_history(ledger: dict, shape: int | None, model: str | None, device: str | None) -> list[str]:
    entries = [e for e in ledger["entries"].values()
               if (shape is None or e["shape"] == shape) and (model is None or e["fingerprint"].startswith(model))
               and (device is None or e["device_kind"] == device)]
    if not entries:
        return ["no ledger entry matches"]
    lines = []
    for e in sorted(entries, key=lambda e: (e["fingerprint"], e["device_kind"], e["numerics_profile"], e["shape"])):
        revoked = f", revoked by run {e['revoked_by']}" if e.get("revoked_by") else ""
        lines.append(f"shape k={e['shape']} of model {e['fingerprint'][:16]}... on {e['device_kind']} "
                     f"({e['numerics_profile']}): {e['state']}{revoked}")
        for ev in e["history"]:
            why = f": {ev['reasons'][0]}" if ev["reasons"] else ""
            lines.append(f"  #{ev['seq']} {ev['at']} run {ev['run_id']} {ev['verdict']} -> {ev['state']}{why}")
    return lines

"""Answers to everyday questions, as lines for people: which shapes may the engine use, what is
in a golden, what happened to a shape."""

from __future__ import annotations

from golden.manifest import check_files
from golden.store import Golden

CONTENT_NOT_CHECKED = ("the data files' content was NOT checked (--no-hash: sizes only); check it with "
                       "`harness golden show` without --no-hash, or `harness golden verify`")


def check_golden_content(gold: Golden) -> int:
    """Every data file's sha256 against the manifest (hashed in parallel); a mismatch is one
    GoldenError line naming the file. Returns the bytes hashed.

    Why by default: a golden whose bytes changed must not be shown as fine when ``score`` would
    refuse it; hashing costs about one read of the golden's files (README, "Measured")."""
    check_files(gold.path, gold.manifest, hashed=list(gold.manifest["files"]))
    return sum(e["bytes"] for e in gold.manifest["files"].values())


def describe_golden(gold: Golden, hashed: int | None = None) -> list[str]:
    """``hashed``: the bytes whose sha256 was checked (None: content not checked, said in words)."""
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
    content = ("content checked: the sha256 of every file matches the manifest" if hashed is not None
               else CONTENT_NOT_CHECKED)
    lines.append(f"  files: {len(m['files'])}, {size / 2**20:.1f} MiB; {content}")
    return lines


def describe_shapes(manifest: dict, checked: bool = True) -> list[str]:
    """Per model, device kind, numerics profile and packer: which k the engine may use per OP, since
    when, by which run, with which packing-laws verdict (a shape is allowed only for its own packer)."""
    lines = [f"promoted-shapes manifest: ledger commit {manifest['ledger_seq']}, generated {manifest['generated']}"
             + ("" if checked else " (NOT checked against its ledger: give --ledger)")]
    if not manifest["models"]:
        lines.append("  no shape recorded yet: the engine may use only the release's own shapes")
    for fp, model in sorted(manifest["models"].items()):
        for device, dev in sorted(model["devices"].items()):
            for profile, p in sorted(dev["profiles"].items()):
                n = p["numerics"]
                lines.append(f"model {fp[:16]}... on {device}, numerics {profile} (threads {n.get('threads')}, "
                             f"mkldnn {n.get('mkldnn')}, tf32 {n.get('matmul_allow_tf32')}, cudnn benchmark "
                             f"{n.get('cudnn_benchmark')}):")
                release = "; ".join(f"OP {op}: k = {', '.join(str(k) for k in ks)}"
                                    for op, ks in sorted(p["release_ops"].items()))
                lines.append(f"  every packer (the release's own shapes): {release}")
                for packer, pk in sorted(p["packers"].items()):
                    lines.append(f"  packer {packer}:")
                    for op, ks in sorted(pk["ops"].items()):
                        lines.append(f"    OP {op}: k = {', '.join(str(k) for k in ks)}")
                    for k, ev in sorted(pk["evidence"].items(), key=lambda kv: int(kv[0])):
                        laws = ev["laws"]
                        lines.append(f"    k={k}: promoted {ev['promoted_at']} for packer {packer} by run "
                                     f"{ev['run_id']} against {ev['golden_id']} (release {ev['release']}, "
                                     f"{ev['corpus_blocks']} blocks, tolerance {ev['tolerance_mode']}, laws "
                                     f"{laws['verdict']}: {laws['examples']} examples, seed {laws['seed']})")
    return lines


def describe_history(ledger: dict, shape: int | None, model: str | None, device: str | None,
                     packer: str | None = None) -> list[str]:
    entries = [e for e in ledger["entries"].values()
               if (shape is None or e["shape"] == shape) and (model is None or e["fingerprint"].startswith(model))
               and (device is None or e["device_kind"] == device)
               and (packer is None or e["packer_identity"] == packer)]
    if not entries:
        return ["no ledger entry matches"]
    lines = []
    for e in sorted(entries, key=lambda e: (e["fingerprint"], e["device_kind"], e["numerics_profile"],
                                            e["packer_identity"], e["shape"])):
        revoked = f", revoked by run {e['revoked_by']}" if e.get("revoked_by") else ""
        lines.append(f"shape k={e['shape']} of model {e['fingerprint'][:16]}... (release {e['release']}) on "
                     f"{e['device_kind']} ({e['numerics_profile']}), packer {e['packer_identity']}: "
                     f"{e['state']}{revoked}")
        for ev in e["history"]:
            why = f": {ev['reasons'][0]}" if ev["reasons"] else ""
            lines.append(f"  #{ev['seq']} {ev['at']} run {ev['run_id']} {ev['verdict']} -> {ev['state']}{why}")
    return lines

"""The policy process: an exported ONNX policy run by ONNX Runtime, reading only contract.json and
policy.onnx, importing NumPy and ONNX Runtime only (no JAX, no purehr): copy this file anywhere.

    python onnx_worker.py EXPORT_DIR

serves an environment process over its standard input and output: each request is one byte
``b"R"`` and the contract's inputs as NumPy ``.npy`` arrays (no pickle; each after its length), answered with the
contract's outputs; ``b"Q"`` ends it, answered with one JSON line (requests served, and whether
JAX was ever imported here). ``purehr.deploy.runner`` is the environment side."""

import io
import json
import struct
import sys
from pathlib import Path

import numpy as np
import onnxruntime


def send(stream, array) -> None:
    """One array: its .npy bytes' length (8 bytes, little-endian) and the bytes."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    stream.write(struct.pack("<Q", buffer.tell()) + buffer.getvalue())


def receive(stream) -> np.ndarray:
    (size,) = struct.unpack("<Q", stream.read(8))
    return np.load(io.BytesIO(stream.read(size)), allow_pickle=False)


def serve(folder: Path, requests, answers) -> dict:
    contract = json.loads((folder / "contract.json").read_text())
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # errors only
    session = onnxruntime.InferenceSession(
        str(folder / contract["files"]["onnx"]["file"]), options, providers=["CPUExecutionProvider"]
    )
    names = [spec["name"] for spec in contract["inputs"]]
    served = 0
    while True:
        command = requests.read(1)
        if command != b"R":
            break
        feeds = {name: receive(requests) for name in names}
        for output in session.run(None, feeds):
            send(answers, output)
        answers.flush()
        served += 1
    return {"requests": served, "jax_imported": "jax" in sys.modules, "purehr_imported": "purehr" in sys.modules}


if __name__ == "__main__":
    report = serve(Path(sys.argv[1]), sys.stdin.buffer, sys.stdout.buffer)
    sys.stdout.buffer.write((json.dumps(report) + "\n").encode())
    sys.stdout.buffer.flush()

#!/usr/bin/env python3
"""Extracts the attribute layout of TransformerEngine's quantized tensor classes from TE's Python source (no import:
TE's PyTorch extension needs a long build), as facts for python/tests/test_te_layout.py: for each storage class the
annotated fields and the parameters of __new__, for each quantizer the attributes its __init__ assigns.

Usage: scripts/te_class_layout.py TE_SOURCE_ROOT [COMMIT] > python/tests/data/te_class_layout.json
(TE_SOURCE_ROOT holds transformer_engine/pytorch/tensor/; a git directory from `fetch` can be exported with
`git --git-dir=... archive HEAD transformer_engine/pytorch/tensor build_tools/VERSION.txt | tar -x -C DIR`.)
"""
import ast
import json
import pathlib
import sys

STORAGE = {  # class -> file under transformer_engine/pytorch/tensor/
    "NVFP4TensorStorage": "storage/nvfp4_tensor_storage.py",
    "MXFP8TensorStorage": "storage/mxfp8_tensor_storage.py",
    "Float8BlockwiseQTensorStorage": "storage/float8_blockwise_tensor_storage.py",
    "Float8TensorStorage": "storage/float8_tensor_storage.py",
}
QUANTIZERS = {
    "NVFP4Quantizer": "nvfp4_tensor.py",
    "MXFP8Quantizer": "mxfp8_tensor.py",
    "Float8BlockQuantizer": "float8_blockwise_tensor.py",
    "Float8CurrentScalingQuantizer": "float8_tensor.py",
    "Float8Quantizer": "float8_tensor.py",
}
TENSORS = {  # the torch.Tensor subclasses and the storage mixin each one inherits
    "NVFP4Tensor": "nvfp4_tensor.py",
    "MXFP8Tensor": "mxfp8_tensor.py",
    "Float8BlockwiseQTensor": "float8_blockwise_tensor.py",
    "Float8Tensor": "float8_tensor.py",
}


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise SystemExit(f"te_class_layout: class {name} not found")


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise SystemExit(f"te_class_layout: {cls.name}.{name} not found")


def _params(fn: ast.FunctionDef) -> list:
    a = fn.args
    return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg not in ("self", "cls")]


def _assigned(fn: ast.FunctionDef, target: str) -> list:
    """Names X of `target.X = ...` / `target.X: T = ...` in fn, in order, once each."""
    out = []
    for node in ast.walk(fn):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == target and t.attr not in out:
                out.append(t.attr)
    return out


def main() -> None:
    root = pathlib.Path(sys.argv[1])
    tensor_dir = root / "transformer_engine" / "pytorch" / "tensor"
    version_file = root / "build_tools" / "VERSION.txt"
    layout = {"te_version": version_file.read_text().strip() if version_file.exists() else "?",
              "te_commit": sys.argv[2] if len(sys.argv) > 2 else "?", "storage": {}, "quantizers": {}, "tensors": {}}
    for name, rel in STORAGE.items():
        cls = _class(ast.parse((tensor_dir / rel).read_text()), name)
        fields = [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
        new = _method(cls, "__new__")
        layout["storage"][name] = {"file": rel, "fields": fields, "new_params": _params(new),
                                   "new_sets": _assigned(new, "instance")}
    for name, rel in QUANTIZERS.items():
        cls = _class(ast.parse((tensor_dir / rel).read_text()), name)
        init = _method(cls, "__init__")
        layout["quantizers"][name] = {"file": rel, "init_params": _params(init), "attributes": _assigned(init, "self")}
    for name, rel in TENSORS.items():
        cls = _class(ast.parse((tensor_dir / rel).read_text()), name)
        layout["tensors"][name] = {"file": rel, "bases": [ast.unparse(b) for b in cls.bases]}
    json.dump(layout, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

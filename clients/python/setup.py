"""Build hook of the dpopt client: generates the gRPC stubs from proto/.

The stubs are never committed. build_py runs protoc (Debian
protobuf-compiler) with grpc_python_plugin (Debian protobuf-compiler-grpc)
on dpopt/v1/*.proto and writes dpopt/v1/*_pb2.py and *_pb2_grpc.py into the
build tree, so the wheel holds them under the package `dpopt.v1` (the
protos' own package path, which makes the generated absolute imports
`from dpopt.v1 import ...` resolve inside this package).

Why not python3-grpc-tools: Debian 12's grpc_tools bundles protoc 3.5.1,
which rejects the proto3 `optional` fields of job_spec.proto.

proto/ is looked up in $DPOPT_PROTO_DIR, ./proto (an sdist or a staged
copy) and ../../proto (the repository).
"""
import glob
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def proto_dir():
    for d in (os.environ.get("DPOPT_PROTO_DIR", ""), os.path.join(HERE, "proto"),
              os.path.join(HERE, "..", "..", "proto")):
        if d and os.path.isfile(os.path.join(d, "dpopt", "v1", "dpopt.proto")):
            return os.path.abspath(d)
    raise SystemExit("dpopt: cannot find proto/dpopt/v1/dpopt.proto "
                     "(set DPOPT_PROTO_DIR)")


def tool(name, package):
    path = shutil.which(name)
    if not path:
        raise SystemExit(f"dpopt: {name} not found (apt-get install {package})")
    return path


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        src = proto_dir()
        protoc = tool("protoc", "protobuf-compiler")
        plugin = tool("grpc_python_plugin", "protobuf-compiler-grpc")
        protos = sorted(glob.glob(os.path.join(src, "dpopt", "v1", "*.proto")))
        out = self.build_lib
        subprocess.run(
            [protoc, "-I", src, f"--plugin=protoc-gen-grpc_python={plugin}",
             f"--python_out={out}", f"--grpc_python_out={out}", *protos],
            check=True)
        init = os.path.join(out, "dpopt", "v1", "__init__.py")
        with open(init, "w") as f:
            f.write('"""Generated from proto/dpopt/v1 at build time (do not edit)."""\n')


setup(cmdclass={"build_py": BuildWithStubs})

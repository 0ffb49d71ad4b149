"""Build of the three C extensions: the load generator's native core
(harness/loadgen/_native.c, the binding, and harness/loadgen/native_core/: the loop and
the protocols), and the summary's radix sort (harness/analysis/stats/_radix.c) and split
of a run's ops by key (harness/analysis/data/_opsplit.c).

Everything else is in pyproject.toml. All are optional: without a working C compiler (or
Python headers) the install goes on and prints one line each; the load generator then
uses its pure-Python path (harness.loadgen.native.ENGINE says which) and the summary
numpy (`loo.sort_ints`, `opsread.run_ops`): the same numbers, more slowly.
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that goes on without an extension it cannot build, and says so."""

    def initialize_options(self) -> None:
        super().initialize_options()
        self.failed: set[str] = set()  # the extensions said not built, "" for the command

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure means "no native core"
            self._fallback("", exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - e.g. CompileError, no compiler at all
            self._fallback(ext.name, exc)

    def _fallback(self, name: str, exc: Exception) -> None:
        if name in self.failed or (not name and self.failed):
            return  # e.g. copying the library that was not built: said once already
        self.failed.add(name)
        what = {"harness.analysis.stats._radix": "radix sort (numpy's sort is used)",
                "harness.analysis.data._opsplit": "ops split (numpy's is used)"}.get(
            name, "native load-generator core (the pure-Python path is used)")
        print(f"kvbench: {what} not built ({type(exc).__name__})", file=sys.stderr)


SOURCES = ["harness/loadgen/_native.c", "harness/loadgen/native_core/engine.c",
           "harness/loadgen/native_core/protocols.c", "harness/loadgen/native_core/tls.c"]
HEADERS = ["harness/loadgen/native_core/engine.h"]


def _openssl() -> dict:
    """TLS in the core where OpenSSL's headers are installed (Debian: libssl-dev, which
    make setup installs); without them the core speaks plain TCP and the Python engine
    measures TLS."""
    for include in ("/usr/include", "/usr/local/include", sys.prefix + "/include"):
        if os.path.exists(f"{include}/openssl/ssl.h"):
            return {"define_macros": [("KVBENCH_TLS", "1")], "libraries": ["ssl", "crypto"],
                    "include_dirs": [include] if include != "/usr/include" else []}
    print("kvbench: OpenSSL headers not found: the native core is built without TLS",
          file=sys.stderr)
    return {}


setup(
    ext_modules=[Extension("harness.loadgen._native", SOURCES, depends=HEADERS,
                           extra_compile_args=["-O2", "-std=gnu11", "-Wall"], **_openssl()),
                 Extension("harness.analysis.stats._radix", ["harness/analysis/stats/_radix.c"],
                           extra_compile_args=["-O2", "-std=gnu11", "-Wall"]),
                 Extension("harness.analysis.data._opsplit",
                           ["harness/analysis/data/_opsplit.c"],
                           extra_compile_args=["-O2", "-std=gnu11", "-Wall"])],
    cmdclass={"build_ext": OptionalBuildExt},
)

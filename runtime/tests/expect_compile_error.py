#!/usr/bin/env python3
"""Compiles one source file and passes only if compilation fails with the
expected diagnostic (a static_assert message), so a case cannot pass by
failing for an unrelated reason. With --must-compile it checks the opposite.

usage: expect_compile_error.py (--expect TEXT | --must-compile) -- COMPILER ARGS... SOURCE
"""
import subprocess
import sys


def main() -> int:
    args = sys.argv[1:]
    if "--" not in args:
        print(__doc__)
        return 2
    split = args.index("--")
    options, command = args[:split], args[split + 1:]
    must_compile = "--must-compile" in options
    expected = options[options.index("--expect") + 1] if "--expect" in options else None
    result = subprocess.run(command + ["-fsyntax-only"], capture_output=True, text=True)
    output = result.stdout + result.stderr
    if must_compile:
        if result.returncode != 0:
            print("control case failed to compile:\n" + output)
            return 1
        return 0
    if result.returncode == 0:
        print("compiled, but it must not")
        return 1
    if expected not in output:
        print(f"failed to compile, but without the expected message {expected!r}:\n{output}")
        return 1
    print(f"rejected as expected: {expected!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A wheel made by hand: what `pip install --no-index FILE` takes with no index, no build
backend and no network, for the tests of pip inside a sandbox."""
import base64
import hashlib
import os
import zipfile


def _digest(data):
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_probe_wheel(directory, name="nsboxprobe", value=42):
    """Writes NAME-1.0-py3-none-any.whl into directory (a package whose VALUE is value) and
    returns its file name."""
    info = f"{name}-1.0.dist-info"
    files = {
        f"{name}/__init__.py": f"VALUE = {value}\n".encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: nsbox-tests\nRoot-Is-Purelib: true\n"
                         b"Tag: py3-none-any\n",
    }
    record = "".join(f"{path},sha256={_digest(data)},{len(data)}\n" for path, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    wheel = f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, wheel), "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return wheel

"""A minimal PEP 517 / PEP 660 build backend for the nsbox client, standard library only, so
that `pip install ./python` needs no network and no setuptools. It packages the `nsbox`
package as a pure-Python wheel (py3-none-any); `pip install -e ./python` gets a .pth file."""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "nsbox"


def _project():
    """name/version/description/requires-python from pyproject.toml's [project] table."""
    path = os.path.join(ROOT, "pyproject.toml")
    try:
        import tomllib  # 3.11+
        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    except ImportError:
        pass
    meta, section = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            m = re.match(r"^\[(.+)\]$", line)
            if m:
                section = m.group(1)
                continue
            m = re.match(r'^([A-Za-z-]+)\s*=\s*"(.*)"$', line)
            if section == "project" and m:
                meta[m.group(1)] = m.group(2)
    return meta


def _dist_name(p):
    return re.sub(r"[-_.]+", "_", p["name"]).lower() + "-" + p["version"]


def _metadata(p):
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"],
             "Summary: " + p.get("description", "")]
    if p.get("requires-python"):
        lines.append("Requires-Python: " + p["requires-python"])
    return ("\n".join(lines) + "\n").encode("utf-8")


def _package_files():
    base = os.path.join(ROOT, PACKAGE)
    for top, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".typed")):
                full = os.path.join(top, name)
                yield full, os.path.relpath(full, ROOT).replace(os.sep, "/")


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _write_wheel(wheel_directory, contents):
    p = _project()
    dist = _dist_name(p)
    info = dist + ".dist-info"
    filename = dist + "-py3-none-any.whl"
    entries = list(contents)
    entries.append((info + "/METADATA", _metadata(p)))
    entries.append((info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: nsbox_build_backend\n"
                    b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    entries.append((info + "/top_level.txt", (PACKAGE + "\n").encode()))
    record = [_record_line(a, d) for a, d in entries] + [info + "/RECORD,,"]
    entries.append((info + "/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for arcname, data in entries:
            zi = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    contents = []
    for full, arcname in _package_files():
        with open(full, "rb") as f:
            contents.append((arcname, f.read()))
    return _write_wheel(wheel_directory, contents)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    pth = (ROOT + "\n").encode("utf-8")
    return _write_wheel(wheel_directory, [("_nsbox_editable.pth", pth)])


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    dist = _dist_name(p)
    filename = dist + ".tar.gz"
    files = [(os.path.join(ROOT, "pyproject.toml"), "pyproject.toml"),
             (os.path.join(ROOT, "_build", "nsbox_build_backend.py"),
              "_build/nsbox_build_backend.py")]
    files += list(_package_files())
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as t:
        for full, arcname in files:
            with open(full, "rb") as f:
                data = f.read()
            ti = tarfile.TarInfo(dist + "/" + arcname)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            t.addfile(ti, io.BytesIO(data))
        meta = _metadata(p)
        ti = tarfile.TarInfo(dist + "/PKG-INFO")
        ti.size, ti.mode, ti.mtime = len(meta), 0o644, 0
        t.addfile(ti, io.BytesIO(meta))
    return filename

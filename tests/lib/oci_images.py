"""Small OCI/Docker test images made offline from the host's static busybox: an OCI layout
directory, an OCI archive and a `docker save` archive of the same two layers.

Layer 1: /bin/busybox and links to it (sh, ls, cat, id, env, test), /etc/passwd with root
only, /keep/{gone,x}, /opq/{a,b}, /etc/secret (0600), /etc/mine (0600, uid 1000), /etc/high (uid
70000), /bin/setuid (4755), and, unless python=False, a stand-in
/usr/bin/python3 (a shell script: nsbox only requires that it exists). Layer 2: a whiteout of
/keep/gone, an opaque /opq holding only c, a hard link /bin/hl to layer 1's busybox,
/keep/added, /top.txt (a regular file at the top level).
The config's Env sets PATH (with /custom appended), FOO and BAR."""
import gzip
import hashlib
import io
import json
import os
import tarfile

BUSYBOX = "/bin/busybox"
APPLETS = ["sh", "ls", "cat", "id", "env", "test", "echo", "stat", "readlink", "touch", "true",
           "grep", "rm"]
ENV = ["PATH=/usr/local/bin:/usr/bin:/bin:/custom", "FOO=from-image", "BAR=image"]


def _add(tar, name, data=b"", mode=0o644, kind=tarfile.REGTYPE, link="", uid=0):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = mode
    ti.uid = ti.gid = uid
    ti.mtime = 1700000000
    ti.linkname = link
    if kind == tarfile.REGTYPE:
        ti.size = len(data)
        tar.addfile(ti, io.BytesIO(data))
    else:
        tar.addfile(ti)


def tar_bytes(entries):
    """entries: (name, data, mode, kind, link) tuples, in order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in entries:
            _add(tar, *e)
    return buf.getvalue()


def layer1(python=True):
    with open(BUSYBOX, "rb") as f:
        bb = f.read()
    e = [("bin", b"", 0o755, tarfile.DIRTYPE), ("bin/busybox", bb, 0o755)]
    e += [("bin/" + a, b"", 0o777, tarfile.SYMTYPE, "busybox") for a in APPLETS]
    e += [("etc", b"", 0o755, tarfile.DIRTYPE),
          ("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n", 0o644),
          ("etc/group", b"root:x:0:\n", 0o644),
          ("keep", b"", 0o755, tarfile.DIRTYPE), ("keep/gone", b"lower\n", 0o644),
          ("opq", b"", 0o755, tarfile.DIRTYPE), ("opq/a", b"a\n"), ("opq/b", b"b\n"),
          ("keep/x", b"x\n"),
          ("etc/secret", b"root only\n", 0o600),
          ("etc/mine", b"appuser's own\n", 0o600, tarfile.REGTYPE, "", 1000),
          ("etc/high", b"an id beyond 65535\n", 0o644, tarfile.REGTYPE, "", 70000),
          ("bin/setuid", b"#!/bin/sh\n", 0o4755)]
    if python:
        e += [("usr", b"", 0o755, tarfile.DIRTYPE), ("usr/bin", b"", 0o755, tarfile.DIRTYPE),
              ("usr/bin/python3", b"#!/bin/sh\necho fake-python3 \"$@\"\n", 0o755)]
    return tar_bytes(e)


def layer2():
    return tar_bytes([("top.txt", b"at the top\n"), ("keep/.wh.gone", b""), ("opq", b"", 0o755, tarfile.DIRTYPE),
                      ("opq/.wh..wh..opq", b""), ("opq/c", b"c\n"),
                      ("bin/hl", b"", 0o755, tarfile.LNKTYPE, "bin/busybox"),
                      ("keep/added", b"upper\n", 0o644)])


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def gz_digest(layer):
    """The digest of a layer's blob as write_layout stores it (gzip)."""
    return sha(gzip.compress(layer, mtime=0))


def config(layers, env=ENV, created="2024-01-02T03:04:05Z"):
    return json.dumps({"architecture": "amd64", "os": "linux",
                       "created": created,
                       "config": {"Env": env, "Cmd": ["/bin/sh"]},
                       "rootfs": {"type": "layers", "diff_ids": [sha(l) for l in layers]}},
                      sort_keys=True).encode()


def write_layout(d, layers=None, ref="latest", env=ENV, corrupt_layer=False, gz=None,
                 media="application/vnd.oci.image.layer.v1.tar+gzip", sizes=None,
                 created="2024-01-02T03:04:05Z"):
    """An OCI layout in directory d (gzip layers; gz: their blobs as given, the gzip of each
    layer by default, media their media type, sizes the sizes the manifest gives them, their
    own by default; created the config's). Returns the manifest digest."""
    layers = layers if layers is not None else [layer1(), layer2()]
    os.makedirs(os.path.join(d, "blobs", "sha256"), exist_ok=True)

    def put(data):
        dg = sha(data)
        with open(os.path.join(d, "blobs", "sha256", dg[7:]), "wb") as f:
            f.write(data)
        return dg
    gz = gz if gz is not None else [gzip.compress(l, mtime=0) for l in layers]
    descs = [{"mediaType": media, "digest": put(g), "size": len(g) if sizes is None else n}
             for g, n in zip(gz, sizes or [None] * len(gz))]
    cfg = config(layers, env, created)
    man = json.dumps({"schemaVersion": 2,
                      "mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                 "digest": put(cfg), "size": len(cfg)},
                      "layers": descs}).encode()
    mdg = put(man)
    with open(os.path.join(d, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion": "1.0.0"}')
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": mdg,
            "size": len(man), "annotations": {"org.opencontainers.image.ref.name": ref}}]}, f)
    if corrupt_layer:  # the bytes change, the name (the digest) stays
        p = os.path.join(d, "blobs", "sha256", descs[-1]["digest"][7:])
        with open(p, "r+b") as f:
            f.seek(len(gz[-1]) // 2)
            f.write(b"\0corrupt\0")
    return mdg


def tar_dir(d, out):
    with tarfile.open(out, "w") as tar:
        for name in sorted(os.listdir(d)):
            tar.add(os.path.join(d, name), arcname=name)


def write_docker_save(out, layers=None, tag="nsbox-test/busybox:1", env=ENV,
                      created="2024-01-02T03:04:05Z"):
    """A `docker save` archive in the classic format (manifest.json, <id>/layer.tar); created:
    its config's (docker writes nanoseconds)."""
    layers = layers if layers is not None else [layer1(), layer2()]
    cfg = config(layers, env, created)
    cfg_name = hashlib.sha256(cfg).hexdigest() + ".json"
    names = []
    with tarfile.open(out, "w") as tar:
        def put(name, data):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tar.addfile(ti, io.BytesIO(data))
        for i, l in enumerate(layers):
            name = "%064x/layer.tar" % (i + 1)
            put(name, l)
            names.append(name)
        put(cfg_name, cfg)
        put("manifest.json", json.dumps([{"Config": cfg_name, "RepoTags": [tag],
                                          "Layers": names}]).encode())


def stored_layers(data):
    """The chain ids in the shared layer store of data directory `data` (root's store)."""
    d = os.path.join(data, "images", ".layers")
    return sorted(n for n in os.listdir(d) if not n.startswith(".")) if os.path.isdir(d) \
        else []


def image_layers(image_dir):
    """The diff/ directories of a stored image's layers, bottom first."""
    with open(os.path.join(image_dir, "layers")) as f:
        ids = f.read().split()
    store = os.path.join(os.path.dirname(image_dir), ".layers")
    return [os.path.join(store, i, "diff") for i in ids]


def find_in_image(image_dir, rel):
    """Where path rel of a stored image is on the host: its merged rootfs/ (an unprivileged
    store), or the highest of its layers (top/ first) that has it; None when none has it."""
    if not os.path.exists(os.path.join(image_dir, "layers")):
        p = os.path.join(image_dir, "rootfs", rel)
        return p if os.path.lexists(p) else None
    for d in [os.path.join(image_dir, "top")] + image_layers(image_dir)[::-1]:
        p = os.path.join(d, rel)
        if os.path.lexists(p):
            return p
    return None


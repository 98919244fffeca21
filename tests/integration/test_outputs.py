"""What a run gives back besides its output (issue 14): images (figures
left open, _repr_png_, pycell.display), the files it changed in /workspace
as resources its client alone can read, values JSON has no type for,
output that fits (head and tail, max_output_bytes, a session cell's whole
output as a resource), output while it runs, and the packages sandbox_info
lists.  Driven on raw pipes (`pycell mcp`) and over HTTP with two tokens."""

import base64
import json
import subprocess
import time

import pytest

from test_mcp_raw import Server
from test_serve import serve, sha  # noqa: F401 (serve is a fixture)
from test_sessions import Client

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(params=["cold", "warm"])
def client(request):
    c = Client("--" + request.param)
    c.initialize()
    yield c
    c.kill()


def content_of(res, kind):
    return [c for c in res["content"] if c["type"] == kind]


# ------------------------------------------------------------ images

def test_figures_left_open_come_back_as_png_images(client):
    res = client.call("run_python", {"code": "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\n"
                                             "plt.figure()\nplt.bar(['a', 'b'], [3, 5])\nplt.get_fignums()"})
    sc = res["structuredContent"]
    assert sc["status"] == "ok" and sc["stderr"] == "", sc
    assert sc["return_value"] == [1, 2]
    images = content_of(res, "image")
    assert [i["mimeType"] for i in images] == ["image/png", "image/png"]
    data = [base64.b64decode(i["data"]) for i in images]
    assert all(d.startswith(PNG) for d in data)
    assert sc["images"] == [{"mime_type": "image/png", "source": "figure 1", "bytes": len(data[0])},
                            {"mime_type": "image/png", "source": "figure 2", "bytes": len(data[1])}]
    assert "--- images (2, as image content) ---\nfigure 1: %d bytes of image/png\n" % len(data[0]) \
        in res["content"][0]["text"]


def test_a_value_with_repr_png_and_display_are_images(client):
    code = ("from PIL import Image\nimport io, pycell\nbuf = io.BytesIO()\n"
            "Image.new('RGB', (3, 2), 'red').save(buf, 'PNG')\npycell.display(buf.getvalue())\n"
            "Image.new('L', (5, 7))")
    res = client.call("run_python", {"code": code})
    sc = res["structuredContent"]
    assert sc["status"] == "ok", sc
    assert [i["source"] for i in sc["images"]] == ["display", "value"]
    from PIL import Image   # python3-pil: the host's reads what the jail made
    import io
    sizes = [Image.open(io.BytesIO(base64.b64decode(i["data"]))).size for i in content_of(res, "image")]
    assert sizes == [(3, 2), (5, 7)]


# a figure, and beside it what the test compares its image with: the same
# figure drawn on its canvas, its pixels cropped to those not white with
# 10 px (savefig.pad_inches at 100 dpi) around them (crop), and saved by
# savefig(bbox_inches="tight") (tight); each figure.draw is a line on stderr
FIGURE = """
import hashlib, io, sys, numpy, matplotlib.pyplot as plt
def figure():
    fig, ax = plt.subplots()
    ax.plot(range(50), [i * i for i in range(50)], label="squares")
    ax.set_title("squares")
    %s
    return fig
ref = figure()
b = io.BytesIO()
ref.savefig(b, format="png", bbox_inches="tight")
tight = hashlib.sha256(b.getvalue()).hexdigest()
ref.canvas.draw()
px = numpy.asarray(ref.canvas.buffer_rgba())
ink = (px != 255).any(axis=2)
r, c = numpy.flatnonzero(ink.any(axis=1)), numpy.flatnonzero(ink.any(axis=0))
crop = px[r[0] - 10:r[-1] + 11, c[0] - 10:c[-1] + 11]
plt.close(ref)
fig = figure()
draw = fig.draw
def counted(renderer):
    sys.stderr.write("draw\\n")
    return draw(renderer)
fig.draw = counted
print(tight, hashlib.sha256(crop.tobytes()).hexdigest(), crop.shape[1], crop.shape[0], *b.getbuffer()[16:24])
fig
"""


def figure_image(client, extra=""):
    """(the image's PNG bytes, stderr, and what FIGURE printed: savefig's
    tight crop's sha256, the canvas crop's and its size, and the tight
    PNG's width and height as bytes)"""
    res = client.call("run_python", {"code": FIGURE % extra})
    sc = res["structuredContent"]
    assert sc["status"] == "ok" and len(sc["images"]) == 1, sc
    return base64.b64decode(content_of(res, "image")[0]["data"]), sc["stderr"], sc["stdout"].split()


def test_a_figure_is_drawn_once_and_cropped_as_savefig_crops_it(client):
    """savefig(bbox_inches="tight") draws a figure twice (to measure what it
    covers, then to save it): the image is the one drawing, cropped to the
    pixels that differ from its background with savefig.pad_inches around
    them, within a few pixels of savefig's crop (which goes by the text's
    boxes, not its ink)."""
    import hashlib
    import io
    from PIL import Image   # python3-pil: the host's reads what the jail made
    data, err, (tight, crop, w, h, *size) = figure_image(client)
    assert err == "draw\n"
    img = Image.open(io.BytesIO(data))
    assert img.mode == "RGB" and img.size == (int(w), int(h))   # opaque: RGB
    assert hashlib.sha256(img.convert("RGBA").tobytes()).hexdigest() == crop
    tw, th = int.from_bytes(bytes(map(int, size[:4])), "big"), int.from_bytes(bytes(map(int, size[4:])), "big")
    assert abs(tw - img.size[0]) <= 4 and abs(th - img.size[1]) <= 6, (tw, th, img.size)


def test_a_transparent_figure_stays_transparent(client):
    """The RGB image is for an opaque drawing: a figure whose background is
    transparent comes back RGBA, its margin transparent, its one drawing
    cropped all the same."""
    import io
    from PIL import Image
    data, err, _ = figure_image(client, "fig.patch.set_alpha(0)")
    img = Image.open(io.BytesIO(data))
    assert err == "draw\n" and img.mode == "RGBA", (err, img.mode)
    assert img.getpixel((0, 0))[3] == img.getpixel((img.size[0] - 1, img.size[1] - 1))[3] == 0


@pytest.mark.parametrize("extra", [
    'ax.legend(bbox_to_anchor=(1.05, 1), loc="upper left")',   # past the right edge
    'ax.legend(bbox_to_anchor=(1.5, 1), loc="upper left")',    # wholly past it
    'plt.rcParams["savefig.dpi"] = 50',                        # savefig's own settings
    'fig.subplots_adjust(0, 0, 1, 1)',                          # drawn to the edges
    'from matplotlib.offsetbox import AnchoredText; ax.add_artist(AnchoredText('
    '"x", loc="upper left", bbox_to_anchor=(1.6, 1), bbox_transform=ax.transAxes))',   # an artist past it
], ids=["legend-across-the-edge", "legend-past-the-edge", "savefig-dpi", "axes-to-the-edges", "artist-past-the-edge"])
def test_a_figure_that_one_drawing_cannot_crop_is_savefigs_crop(client, extra):
    """Where cropping the drawing could differ from savefig's crop (a
    legend or text reaching past the canvas, which savefig's crop takes
    in; a drawing that reaches an edge; savefig settings of the user's),
    the image is savefig's, byte for byte."""
    import hashlib
    data, err, (tight, *_) = figure_image(client, extra)
    assert hashlib.sha256(data).hexdigest() == tight
    assert err.count("draw\n") >= 2


def test_a_displayed_figure_left_open_is_sent_once(client):
    code = ("import matplotlib.pyplot as plt, pycell\nfig = plt.figure()\nplt.plot([1, 2])\n"
            "pycell.display(fig)\nplt.figure()\nplt.plot([3])\nfig")
    sc = client.call("run_python", {"code": code})["structuredContent"]
    assert [i["source"] for i in sc["images"]] == ["display", "figure 2"], sc


@pytest.mark.parametrize("arg, error", [
    ("42", "TypeError: pycell.display() shows images: a matplotlib figure, an object with _repr_png_ "
           "(a PIL image...), or PNG bytes, not int"),
    ("b'GIF89a'", "ValueError: pycell.display(): these bytes are not a PNG image"),
])
def test_display_refuses_what_is_not_an_image(client, arg, error):
    sc = client.call("run_python", {"code": "import pycell\npycell.display(%s)" % arg})["structuredContent"]
    assert sc["status"] == "error" and sc["stderr"].endswith(error + "\n"), sc


def test_at_most_eight_images_a_call(client):
    res = client.call("run_python", {"code": "import matplotlib.pyplot as plt\n"
                                             "for i in range(10):\n    plt.figure()\n"})
    sc = res["structuredContent"]
    assert len(content_of(res, "image")) == 8 and len(sc["images"]) == 8
    assert sc["stderr"] == "pycell: 2 more images not sent (at most 8 a cell)\n"


def test_a_cell_closes_its_figures_and_the_next_sends_only_its_own(client):
    sid = client.open()
    r1 = client.call("run_python", {"session_id": sid, "code": "import matplotlib.pyplot as plt\nplt.plot([1])"})
    assert len(content_of(r1, "image")) == 1
    r2 = client.call("run_python", {"session_id": sid, "code": "len(plt.get_fignums())"})
    assert r2["structuredContent"]["return_value"] == 0 and content_of(r2, "image") == []
    assert "images" not in r2["structuredContent"]


# ------------------------------------------------------------ files out

def test_files_a_run_writes_are_listed_linked_and_readable(client):
    code = ("import os\nos.makedirs('out', exist_ok=True)\nopen('out/a b.txt', 'w').write('caf\u00e9\\n')\n"
            "open('blob.bin', 'wb').write(bytes(range(256)))\nopen('given.txt', 'a').write('')\n")
    res = client.call("run_python", {"code": code, "files": [{"path": "given.txt", "text": "in"}]})
    sc = res["structuredContent"]
    assert sc["status"] == "ok", sc
    files = sc["files"]
    # the call's own file is not its output (it was appended nothing)
    assert [(f["path"], f["size"], f["mime_type"]) for f in files] == [
        ("blob.bin", 256, "application/octet-stream"), ("out/a b.txt", 6, "text/plain")]
    base = files[0]["uri"].rsplit("/files/", 1)[0]
    assert base.startswith("pycell://runs/")
    assert files[1]["uri"] == base + "/files/out/a%20b.txt"
    links = content_of(res, "resource_link")
    assert [(l["uri"], l["name"], l["mimeType"], l["size"]) for l in links] == [
        (f["uri"], f["path"], f["mime_type"], f["size"]) for f in files]
    text = client.request(90, "resources/read", {"uri": files[1]["uri"]})["result"]
    assert text["contents"] == [{"uri": files[1]["uri"], "mimeType": "text/plain", "text": "caf\u00e9\n"}]
    blob = client.request(91, "resources/read", {"uri": files[0]["uri"]})["result"]["contents"][0]
    assert "text" not in blob and base64.b64decode(blob["blob"]) == bytes(range(256))
    listed = client.request(92, "resources/list", {})["result"]["resources"]
    assert {(r["uri"], r["size"]) for r in listed} >= {(f["uri"], f["size"]) for f in files}


def test_past_the_bytes_a_call_keeps_a_file_is_listed_not_kept(client):
    code = "open('big.bin', 'wb').write(b'x' * (17 << 20))\nopen('small.txt', 'w').write('ok')"
    res = client.call("run_python", {"code": code}, timeout=60)
    files = res["structuredContent"]["files"]
    assert files[0] == {"path": "big.bin", "size": 17 << 20, "mime_type": "application/octet-stream",
                        "omitted": "size"}
    assert files[1]["path"] == "small.txt" and "uri" in files[1]
    assert [l["name"] for l in content_of(res, "resource_link")] == ["small.txt"]
    assert "big.bin: 17825792 bytes, application/octet-stream, not kept: past the bytes a call keeps" \
        in res["content"][0]["text"]


def test_at_most_64_files_are_listed(client):
    res = client.call("run_python", {"code": "for i in range(70):\n    open('f%02d' % i, 'w').write(str(i))"})
    sc = res["structuredContent"]
    assert [f["path"] for f in sc["files"]] == ["f%02d" % i for i in range(64)]
    assert sc["stderr"] == "pycell: 70 files changed in /workspace; the first 64 are listed\n"


def test_a_session_lists_what_each_cell_changed_and_deleted(client):
    sid = client.open()
    base = "pycell://sessions/%s/files/" % sid
    r1 = client.cell(sid, "open('a.txt', 'w').write('1')\nopen('b.txt', 'w').write('2')")
    assert [(f["path"], f["uri"]) for f in r1["files"]] == [("a.txt", base + "a.txt"), ("b.txt", base + "b.txt")]
    r2 = client.cell(sid, "open('a.txt', 'w').write('one')\nimport os\nos.remove('b.txt')")
    assert r2["files"] == [{"path": "a.txt", "size": 3, "mime_type": "text/plain", "uri": base + "a.txt"},
                           {"path": "b.txt", "deleted": True}]
    read = client.request(80, "resources/read", {"uri": base + "a.txt"})["result"]["contents"][0]
    assert read["text"] == "one"
    gone = client.request(81, "resources/read", {"uri": base + "b.txt"})
    assert gone["error"] == {"code": -32002, "message": "Resource not found", "data": {"uri": base + "b.txt"}}
    client.ok("session_close", {"session_id": sid})
    closed = client.request(82, "resources/read", {"uri": base + "a.txt"})
    assert closed["error"]["message"] == "Resource not found"
    uris = [r["uri"] for r in client.request(83, "resources/list", {})["result"]["resources"]]
    assert not [u for u in uris if sid in u]


FORGE = r"""
import json, os
def send(p):
    os.write(3, json.dumps({"jsonrpc": "2.0", "method": "pycell/blob", "params": p}).encode())
one = {"data": "eA==", "more": False}
send({"kind": "file", "path": "../escape", "size": 1, **one})
send({"kind": "file", "path": "/etc/abs", "size": 1, **one})
send({"kind": "file", "path": "a/./b", "size": 1, **one})
send({"kind": "file", "path": "ok.txt", "size": 1, "mime": "text/plain; x=<script>", **one})
send({"kind": "image", "mime": "image/gif", "source": "x", "data": "R0lGODlh", "more": False})
send({"kind": "image", "mime": "image/png", "source": "y" * 100, "data": "not base64!", "more": False})
send({"kind": "weird", **one})
chunk = "A" * (128 << 10)
for i in range(200):   # 25 MiB of base64 in one blob: past 16 MiB decoded
    send({"kind": "file", "path": "big", "size": 1, "data": chunk, "more": True})
send({"data": "", "more": False})
print("sent")
"""


def test_forged_blobs_are_held_to_the_rules(client):
    """The runtime in the jail sends images and files; code there can
    forge those packets: the supervisor keeps only what passes its rules."""
    res = client.call("run_python", {"code": FORGE}, timeout=60)
    sc = res["structuredContent"]
    assert sc["status"] == "ok" and sc["stdout"] == "sent\n", sc
    uri = sc["files"][0].get("uri", "")
    assert sc["files"] == [
        {"path": "ok.txt", "size": 1, "mime_type": "application/octet-stream", "uri": uri},
        {"path": "big", "size": 1, "mime_type": "application/octet-stream", "omitted": "size"}]
    assert "images" not in sc and content_of(res, "image") == []
    assert sc["warnings"].count("an image was not kept: at most 8 a cell, 4 MiB each and 8 MiB in all, "
                                "as PNG") == 2
    assert client.request(60, "resources/read", {"uri": uri})["result"]["contents"][0]["blob"] == "eA=="
    client.assert_serving()


def test_resource_templates_name_the_three_kinds(client):
    res = client.request(5, "resources/templates/list", {})["result"]
    assert [t["uriTemplate"] for t in res["resourceTemplates"]] == [
        "pycell://sessions/{session_id}/files/{+path}", "pycell://sessions/{session_id}/cells/{cell}/{stream}",
        "pycell://runs/{run_id}/files/{+path}"]


def test_a_resource_is_its_clients_only(serve, tmp_path):  # noqa: F811
    s = serve("--listen", "127.0.0.1:0", tokens=[
        {"name": "a", "sha256": sha("ta")}, {"name": "b", "sha256": sha("tb")}], tmp_path=tmp_path)
    A, B = {"Authorization": "Bearer ta"}, {"Authorization": "Bearer tb"}

    def rpc(i, method, params, h):
        r, data = s.modern(i, method, params, headers=h)
        assert r.status == 200, data
        return json.loads(data)
    res = rpc(1, "tools/call", {"name": "run_python", "arguments": {"code": "open('secret', 'w').write('s')"}}, A)
    uri = res["result"]["structuredContent"]["files"][0]["uri"]
    # over HTTP, resources/read names its uri in Mcp-Name too
    got = rpc(2, "resources/read", {"uri": uri}, {**A, "Mcp-Name": uri})["result"]
    assert got["contents"] == [{"uri": uri, "mimeType": "text/plain", "text": "s"}]
    assert (got["ttlMs"], got["cacheScope"], got["resultType"]) == (0, "private", "complete")
    # 2026-07-28's not found is -32602
    assert rpc(3, "resources/read", {"uri": uri}, {**B, "Mcp-Name": uri})["error"] == {
        "code": -32602, "message": "Resource not found", "data": {"uri": uri}}
    assert rpc(4, "resources/list", {}, B)["result"]["resources"] == []
    assert [r["uri"] for r in rpc(5, "resources/list", {}, A)["result"]["resources"]] == [uri]


# ------------------------------------------------------------ values

def test_values_json_has_no_type_for_come_back_typed(client):
    code = ("import numpy as np, pandas as pd\n"
            "df = pd.DataFrame({'a': [1, 2, 3], 'b': ['x', None, 'z'], 'c': [0.5, float('nan'), 2.0]})\n"
            "[np.int64(7), np.float32(0.5), np.arange(6).reshape(2, 3), np.zeros(1001), df, df.b,"
            " pd.Timestamp('2026-07-28 12:00')]")
    v = client.call("run_python", {"code": code})["structuredContent"]["return_value"]
    assert v[0] == 7 and v[1] == 0.5
    assert v[2] == {"$type": "numpy.ndarray", "dtype": "int64", "shape": [2, 3], "items": [[0, 1, 2], [3, 4, 5]]}
    assert {k: v[3][k] for k in ("$type", "dtype", "shape", "truncated")} == {
        "$type": "numpy.ndarray", "dtype": "float64", "shape": [1001], "truncated": True}
    assert len(v[3]["items"]) == 1000
    assert v[4] == {"$type": "pandas.DataFrame", "shape": [3, 3], "columns": ["a", "b", "c"],
                    "dtypes": ["int64", "object", "float64"], "index": [0, 1, 2],
                    "rows": [[1, "x", 0.5], [2, None, {"$type": "float", "value": "nan"}], [3, "z", 2.0]]}
    assert v[5] == {"$type": "pandas.Series", "name": "b", "dtype": "object", "index": [0, 1, 2],
                    "length": 3, "items": ["x", None, "z"]}
    assert v[6] == {"$type": "datetime", "value": "2026-07-28T12:00:00"}


def test_a_big_frame_comes_back_with_a_bounded_preview(client):
    code = "import pandas as pd\npd.DataFrame({'n': range(100000)})"
    v = client.call("run_python", {"code": code})["structuredContent"]["return_value"]
    assert v["shape"] == [100000, 1] and v["truncated"] is True
    assert v["rows"] == [[i] for i in range(20)] and v["index"] == list(range(20))


# ------------------------------------------------------------ output that fits

def test_a_long_output_keeps_its_head_and_its_tail(client):
    code = "for i in range(100000):\n    print(i)\nprint('RESULT=42')"
    sc = client.call("run_python", {"code": code, "max_output_bytes": 2048})["structuredContent"]
    out = sc["stdout"]
    assert out.startswith("0\n1\n2\n") and out.endswith("99999\nRESULT=42\n")
    assert len(out.encode()) <= 2048 and sc["truncated"]["stdout"] is True
    whole = "".join("%d\n" % i for i in range(100000)) + "RESULT=42\n"
    head, marker, tail = out.partition("\n[... pycell: %d bytes of stdout dropped here ...]\n"
                                       % sc["dropped_bytes"]["stdout"])
    assert marker and whole.startswith(head) and whole.endswith(tail)
    assert len(head) + len(tail) + sc["dropped_bytes"]["stdout"] == len(whole)


@pytest.mark.parametrize("value, why", [
    (100, '"max_output_bytes" must be an integer of at least 256, got less'),
    ("1K", '"max_output_bytes" must be an integer of at least 256, got a string'),
    (1 << 40, '"max_output_bytes" 1099511627776 is above this server\'s limit of 1048576: use at most '
              'that or leave it out'),
])
def test_a_bad_max_output_bytes_is_refused(client, value, why):
    assert client.error_text("run_python", {"code": "1", "max_output_bytes": value}) == \
        "Invalid arguments for run_python: " + why


def test_a_session_cells_whole_output_is_a_resource(client):
    sid = client.open()
    code = "import sys\nfor i in range(3000):\n    print(i)\nsys.stderr.write('warn\\n')"
    res = client.call("run_python", {"session_id": sid, "code": code, "max_output_bytes": 1024})
    sc = res["structuredContent"]
    uris = {"stdout": "pycell://sessions/%s/cells/1/stdout" % sid,
            "stderr": "pycell://sessions/%s/cells/1/stderr" % sid}
    assert sc["session"]["output"] == uris
    assert sc["truncated"] == {"stdout": True, "stderr": False} and len(sc["stdout"]) <= 1024
    # the stream the result cut is linked, and all of it is there to read
    assert [l["uri"] for l in content_of(res, "resource_link")] == [uris["stdout"]]
    whole = client.request(70, "resources/read", {"uri": uris["stdout"]})["result"]["contents"][0]
    assert whole == {"uri": uris["stdout"], "mimeType": "text/plain",
                     "text": "".join("%d\n" % i for i in range(3000))}
    err = client.request(71, "resources/read", {"uri": uris["stderr"]})["result"]["contents"][0]
    assert err["text"] == "warn\n"
    assert "--- the cell's whole output ---\nstdout: %s\n" % uris["stdout"] in res["content"][0]["text"]


# ------------------------------------------------------------ output while it runs

@pytest.mark.parametrize("session", [False, True], ids=["run", "cell"])
def test_output_comes_in_progress_notifications_as_it_is_printed(client, session):
    args = {"code": "import sys, time\nfor i in range(5):\n    print('line', i, flush=True)\n"
                    "    print('warn', i, file=sys.stderr, flush=True)\n    time.sleep(0.4)\n"}
    if session:
        args["session_id"] = client.open()
    client.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                 "params": {"name": "run_python", "arguments": args, "_meta": {"progressToken": "p"}}})
    notes, t0 = [], time.monotonic()
    while True:
        msg = client.recv(timeout=30)
        if msg.get("id") == 7:
            break
        assert msg["method"] == "notifications/progress" and msg["params"]["progressToken"] == "p"
        notes.append((time.monotonic() - t0, msg["params"].get("message", "")))
    assert msg["result"]["structuredContent"]["status"] == "ok"
    told = [m for _, m in notes if "output:" in m]
    # each line was told before the run ended, in order, each stream named
    # where it changes
    seen = "".join(m.split("output:\n", 1)[1] for m in told)
    lines = [x for x in seen.replace("[stdout] ", "").replace("[stderr] ", "").split("\n") if x]
    assert lines == [x for i in range(5) for x in ("line %d" % i, "warn %d" % i)], told
    assert "[stderr] warn 0" in seen
    assert told and notes[-1][0] < 2.0 + 0.5   # the last came while it ran
    # at most one notification every 250 ms
    times = [t for t, _ in notes]
    assert all(b - a >= 0.2 for a, b in zip(times, times[1:])), times


# ------------------------------------------------------------ packages

def test_sandbox_info_lists_the_importable_packages(client):
    info = client.ok("sandbox_info", {})
    got = {p["name"].lower(): p["version"] for p in info["packages"]}
    host = subprocess.run(["/usr/bin/python3", "-c", "import numpy, pandas; print(numpy.__version__, "
                           "pandas.__version__)"], capture_output=True, text=True, check=True).stdout.split()
    assert (got["numpy"], got["pandas"]) == tuple(host)
    assert [p["name"].lower() for p in info["packages"]] == sorted(got)


def test_a_policy_with_a_venv_lists_the_venvs_packages(host_tmp, policy_file):
    venv = host_tmp / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    dist = site / "demo_pkg-1.2.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.2.3\n")
    (site / "demo_pkg.py").write_text("VALUE = 7\n")
    pol = policy_file({"filesystem": {"binds": [str(venv)]},
                       "python": {"interpreter": str(venv / "bin" / "python")}}, name="venv")
    c = Client("--policy", pol)
    try:
        c.initialize()
        names = {p["name"]: p["version"] for p in c.ok("sandbox_info", {})["packages"]}
        assert names == {"demo-pkg": "1.2.3"}
        assert c.ok("run_python", {"code": "import demo_pkg\ndemo_pkg.VALUE"})["return_value"] == 7
    finally:
        c.kill()

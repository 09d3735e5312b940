"""Records where torch.load sends storages saved with given location tags.

Reads JSON from stdin: {"tags": [...], "dicts": [{...}, ...], "strings": [...]}.
Saves one 1-byte uint8 tensor per tag (value = the tag's index), tagged with
that tag by a registered tagger, so a CPU-only torch can write cuda:N tags.
Then loads the file once per map_location (each dict, each string and each
torch.device of a string) with a registered deserializer that records the
location torch asks it to restore each storage to, and returns the storage
on the CPU. Writes JSON to stdout:
{"dicts": [{tag: location}], "strings": [{tag: location}], "devices": [...]}.
"""
import io
import json
import sys

import torch
import torch.serialization as ser

req = json.load(sys.stdin)
tags = req["tags"]
assert len(tags) < 256

tensors = [torch.tensor([i], dtype=torch.uint8) for i in range(len(tags))]
tag_of_ptr = {t.storage().data_ptr(): tag for t, tag in zip(tensors, tags)}
restored = {}


def tagger(storage):
    return tag_of_ptr.get(storage.data_ptr())


def deserializer(storage, location):
    restored[tags[storage[0]]] = location
    return storage


# Priority 1 runs before torch's own cpu (10) and cuda (20) handlers.
ser.register_package(1, tagger, deserializer)

buf = io.BytesIO()
torch.save(tensors, buf)
data = buf.getvalue()


def load(map_location):
    restored.clear()
    out = torch.load(io.BytesIO(data), map_location=map_location, weights_only=False)
    assert [int(t[0]) for t in out] == list(range(len(tags)))
    assert sorted(restored) == sorted(tags), restored
    return dict(restored)


json.dump({
    "version": torch.__version__,
    "dicts": [load(d) for d in req["dicts"]],
    "strings": [load(s) for s in req["strings"]],
    "devices": [load(torch.device(s)) for s in req["strings"]],
}, sys.stdout)

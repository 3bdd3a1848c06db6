from vlc_client import Client, NotFound

client = Client("http://127.0.0.1:8080", token="s3cret")
print(client.info("deep10k"))

# Add two documents (a dict, or a tuple (id, vector, payload)); ids come back.
ids = client.add("deep10k", [
    {"id": "doc-a", "vector": [0.01] * 96, "payload": {"lang": "en"}},
    ("doc-b", [0.02] * 96, {"lang": "fr"}),
])

# The 5 nearest of a vector, then only those whose payload has lang "fr".
for hit in client.search("deep10k", [0.01] * 96, k=5):
    print(hit.id, round(hit.distance, 4), hit.payload)
print(client.search("deep10k", [0.01] * 96, k=5, where={"lang": "fr"}))

# A batch: one list of hits per vector (a numpy array works too).
results = client.search_batch("deep10k", [[0.01] * 96, [0.02] * 96], k=3)
print([[h.id for h in hits] for hits in results])

client.delete("deep10k", ids)
try:
    client.get("deep10k", "doc-a")
except NotFound as e:
    print("deleted:", e.message)

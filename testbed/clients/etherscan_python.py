"""Calls every function of the PyPI package etherscan-python against an Etherscan-compatible API
(ots-indexer's), filling each parameter by its name from a JSON object of sample values, and
prints one JSON line per call: "ok" (the library returned a result), "refused" (it raised its
own assertion on a well-formed refusal from the API) or "broken" (anything else: the library
could not read the answer). Used by tests/it/etherscan_clients.rs.

    python etherscan_python.py http://127.0.0.1:8546 '{"values": {...}, "overrides": {...}}'
"""

import inspect
import json
import sys

import etherscan
from etherscan import Etherscan
from etherscan.enums.fields_enum import FieldsEnum

base, samples = sys.argv[1], json.loads(sys.argv[2])
# The library builds every URL from this prefix (Etherscan's host, formatted with the network).
FieldsEnum.PREFIX = f"{base}/api?"
client = Etherscan("anykey")

MODULES = [
    etherscan.accounts, etherscan.blocks, etherscan.contracts, etherscan.proxy, etherscan.tokens,
    etherscan.transactions, etherscan.stats, etherscan.gastracker, etherscan.pro,
]

for name in sorted(n for n in dir(client) if n.startswith("get_")):
    static = next((getattr(m, name) for m in MODULES if hasattr(m, name)), None)
    if static is None:
        continue
    own = samples["overrides"].get(name, {})
    params = inspect.signature(static).parameters
    args = [own.get(p, samples["values"].get(p, "")) for p in params]
    try:
        getattr(client, name)(*args)
        line = {"call": name, "outcome": "ok"}
    except AssertionError as e:
        line = {"call": name, "outcome": "refused", "detail": str(e)}
    except Exception as e:  # the library could not read the answer
        line = {"call": name, "outcome": "broken", "detail": f"{type(e).__name__}: {e}"}
    print(json.dumps(line), flush=True)

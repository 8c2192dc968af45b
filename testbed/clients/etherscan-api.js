// Calls every function of the npm package etherscan-api against an Etherscan-compatible API
// (ots-indexer's), filling each parameter by its name from a JSON object of sample values, and
// prints one JSON line per call: "ok" (the library resolved with a result), "refused" (it
// rejected with the API's own reason, read from a well-formed answer) or "broken" (anything
// else: the library could not read the answer). Used by tests/it/etherscan_clients.rs.
//
//   node etherscan-api.js http://127.0.0.1:8546 '{"address": "0x…", …}'
"use strict";
const axios = require("axios");
const init = require("etherscan-api").init;

const [base, samplesJson] = process.argv.slice(2);
const samples = JSON.parse(samplesJson);
const client = axios.create({ baseURL: base, timeout: 30000 });
const api = init("anykey", undefined, 30000, client);

function parameterNames(fn) {
  const text = fn.toString();
  const list = text.slice(text.indexOf("(") + 1, text.indexOf(")"));
  return list.split(",").map((p) => p.replace(/\/\*.*?\*\//g, "").split("=")[0].trim()).filter(Boolean);
}

async function main() {
  for (const [module, functions] of Object.entries(api)) {
    for (const [name, fn] of Object.entries(functions)) {
      if (typeof fn !== "function") continue;
      const full = `${module}.${name}`;
      const own = samples.overrides[full] || {};
      const args = parameterNames(fn).map((p) => (p in own ? own[p] : samples.values[p]));
      let line;
      try {
        const answer = await fn.apply(functions, args);
        const readable = answer && typeof answer === "object" && "result" in answer;
        line = readable ? { call: full, outcome: "ok" } : { call: full, outcome: "broken", detail: String(answer) };
      } catch (e) {
        // The library rejects with the API's reason (a string) for a refusal in the envelope,
        // with an Error carrying the node's message for a JSON-RPC error answer (proxy), and
        // with an Error wrapping the failure when it could not fetch or read the answer.
        const detail = String(e && e.message !== undefined ? e.message : e);
        const refused = typeof e === "string" || !/^(AxiosError|Error|TypeError|SyntaxError)\b/.test(detail);
        line = { call: full, outcome: refused ? "refused" : "broken", detail };
      }
      console.log(JSON.stringify(line));
    }
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

// Compiles contracts/*.sol with solc-js (offline: the compiler ships inside the npm package)
// and writes build/artifacts.json: { Name: { abi, bytecode, deployedBytecode } }.
"use strict";
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const here = __dirname;
const sourcesDir = path.join(here, "contracts");
const sources = {};
for (const file of fs.readdirSync(sourcesDir).filter((f) => f.endsWith(".sol")).sort()) {
  sources[`contracts/${file}`] = { content: fs.readFileSync(path.join(sourcesDir, file), "utf8") };
}

const input = {
  language: "Solidity",
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: "cancun",
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] } },
  },
};

function findImports(importPath) {
  const candidate = path.join(here, "node_modules", importPath);
  if (fs.existsSync(candidate)) {
    return { contents: fs.readFileSync(candidate, "utf8") };
  }
  return { error: `import not found: ${importPath}` };
}

const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
const errors = (output.errors || []).filter((e) => e.severity === "error");
if (errors.length > 0) {
  for (const e of errors) console.error(e.formattedMessage);
  process.exit(1);
}

const artifacts = {};
for (const file of Object.keys(sources)) {
  for (const [name, c] of Object.entries(output.contracts[file])) {
    artifacts[name] = {
      abi: c.abi,
      bytecode: "0x" + c.evm.bytecode.object,
      deployedBytecode: "0x" + c.evm.deployedBytecode.object,
    };
  }
}
fs.mkdirSync(path.join(here, "build"), { recursive: true });
fs.writeFileSync(path.join(here, "build", "artifacts.json"), JSON.stringify(artifacts, null, 1) + "\n");
console.log(`compiled ${Object.keys(artifacts).length} contracts with solc ${solc.version()}`);

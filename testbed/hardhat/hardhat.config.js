// Hardhat 2's node, the test bed's second node implementation: no eth_getBlockReceipts, no
// trace_* and no named tracers, no ots_ or erigon_. Mines only on evm_mine, as the Anvil of the
// tests does, with 30 unlocked accounts and room for 100 transactions of 3M gas a block.
module.exports = {
  networks: {
    hardhat: {
      chainId: 31337,
      blockGasLimit: 1000000000,
      accounts: { count: 30 },
      mining: { auto: false, interval: 0 },
    },
  },
};

// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// A contract that is not a token: the ERC20 probes revert on it.
contract Counter {
    uint256 public count;

    function increment() external {
        count += 1;
    }
}

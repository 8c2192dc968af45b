// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// Sends several ERC20 transfers from the caller in one transaction, so that one tx carries
/// several Transfer logs (the transfer index counts transactions, not logs).
contract Batcher {
    function batchTransfer(IERC20 token, address[] calldata to, uint256[] calldata amounts) external {
        for (uint256 i = 0; i < to.length; i++) {
            require(token.transferFrom(msg.sender, to[i], amounts[i]), "transfer failed");
        }
    }
}

// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// Answers every call with the same bytes, which decode both as a string and as a uint8.
/// Only the junkjunkjunk() check of the ERC20 classifier tells it apart from a token.
contract JunkFallback {
    fallback(bytes calldata) external returns (bytes memory) {
        return abi.encode("");
    }
}

// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// The shape of a Uniswap V2 pair, as far as a classifier can see it: two tokens and a factory.
contract Pair {
    address public factory;
    address public token0;
    address public token1;

    constructor() {
        factory = msg.sender;
    }

    function initialize(address token0_, address token1_) external {
        require(msg.sender == factory, "factory only");
        token0 = token0_;
        token1 = token1_;
    }
}

/// A Uniswap-V2-style factory: CREATE2 pairs, announced by `PairCreated`.
contract PairFactory {
    event PairCreated(address indexed token0, address indexed token1, address pair, uint256);

    address[] public allPairs;

    function createPair(address tokenA, address tokenB) external returns (address pair) {
        (address token0, address token1) = tokenA < tokenB ? (tokenA, tokenB) : (tokenB, tokenA);
        pair = address(new Pair{salt: keccak256(abi.encodePacked(token0, token1))}());
        Pair(pair).initialize(token0, token1);
        allPairs.push(pair);
        emit PairCreated(token0, token1, pair, allPairs.length);
    }
}

/// Emits a `PairCreated` for a contract it did not create: a classifier must not believe it.
contract PairImpostor {
    event PairCreated(address indexed token0, address indexed token1, address pair, uint256);

    function lie(address token0, address token1, address pair) external {
        emit PairCreated(token0, token1, pair, 1);
    }
}

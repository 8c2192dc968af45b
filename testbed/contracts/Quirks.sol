// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// MKR style: `name` and `symbol` are bytes32, not strings.
contract Bytes32MetadataToken {
    event Transfer(address indexed from, address indexed to, uint256 value);

    bytes32 public name = "Maker";
    bytes32 public symbol = "MKR";
    uint8 public decimals = 18;
    mapping(address => uint256) public balanceOf;

    constructor() {
        balanceOf[msg.sender] = 1e24;
    }

    function transfer(address to, uint256 value) external returns (bool) {
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        emit Transfer(msg.sender, to, value);
        return true;
    }
}

/// USDT style: `transfer` returns nothing.
contract NoReturnToken {
    event Transfer(address indexed from, address indexed to, uint256 value);

    string public name = "Tether USD";
    string public symbol = "USDT";
    uint8 public decimals = 6;
    mapping(address => uint256) public balanceOf;

    constructor() {
        balanceOf[msg.sender] = 1e18;
    }

    function transfer(address to, uint256 value) external {
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        emit Transfer(msg.sender, to, value);
    }

    /// Tokens do rename themselves (rebrands, upgrades): stored metadata must be refreshable.
    function rename(string calldata name_, string calldata symbol_) external {
        name = name_;
        symbol = symbol_;
    }
}

/// An ERC721 that never heard of ERC165: 4-topic Transfers and `ownerOf`, no `supportsInterface`.
contract PlainNft {
    event Transfer(address indexed from, address indexed to, uint256 indexed tokenId);

    string public name = "Plain NFT";
    string public symbol = "PNFT";
    mapping(uint256 => address) public ownerOf;

    function mint(address to, uint256 id) external {
        require(ownerOf[id] == address(0), "minted");
        ownerOf[id] = to;
        emit Transfer(address(0), to, id);
    }
}

/// Emits Transfer-shaped logs but is no token: it has no `decimals`, `name` or `ownerOf`.
contract FakeTransferEmitter {
    event Transfer(address indexed from, address indexed to, uint256 value);

    function emitTransfer(address from, address to, uint256 value) external {
        emit Transfer(from, to, value);
    }
}

/// A token initialised after its deployment, as a clone or proxy is: `name()` and `symbol()`
/// answer empty strings until `initialize` runs in a later block.
contract LazyToken {
    event Transfer(address indexed from, address indexed to, uint256 value);

    string public name;
    string public symbol;
    uint8 public decimals = 18;
    mapping(address => uint256) public balanceOf;

    function initialize(string calldata name_, string calldata symbol_) external {
        name = name_;
        symbol = symbol_;
    }

    function mint(address to, uint256 value) external {
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }
}

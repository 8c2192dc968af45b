// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {ERC4626} from "@openzeppelin/contracts/token/ERC20/extensions/ERC4626.sol";
import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";
import {ERC1155} from "@openzeppelin/contracts/token/ERC1155/ERC1155.sol";
import {Clones} from "@openzeppelin/contracts/proxy/Clones.sol";

/// OpenZeppelin ERC721 with its metadata extension.
contract DemoNft is ERC721 {
    constructor() ERC721("Demo NFT", "DNFT") {}

    function mint(address to, uint256 id) external {
        _mint(to, id);
    }
}

/// OpenZeppelin ERC1155.
contract DemoMulti is ERC1155 {
    constructor() ERC1155("https://example.invalid/{id}.json") {}

    function mint(address to, uint256 id, uint256 amount) external {
        _mint(to, id, amount, "");
    }

    function mintBatch(address to, uint256[] calldata ids, uint256[] calldata amounts) external {
        _mintBatch(to, ids, amounts, "");
    }

    function move(address from, address to, uint256 id, uint256 amount) external {
        _safeTransferFrom(from, to, id, amount, "");
    }
}

/// OpenZeppelin ERC4626 vault over any ERC20.
contract DemoVault is ERC4626 {
    constructor(IERC20 asset_) ERC20("Demo Vault", "vDEMO") ERC4626(asset_) {}
}

/// An ERC20 meant to sit behind EIP-1167 clones: until `initialize` its metadata reverts, so a
/// clone is no token until initialised.
contract CloneableToken is ERC20 {
    string private _tokenName;
    string private _tokenSymbol;
    bool private _ready;

    constructor() ERC20("", "") {}

    function initialize(string calldata name_, string calldata symbol_, address to, uint256 amount) external {
        require(!_ready, "initialised");
        _ready = true;
        _tokenName = name_;
        _tokenSymbol = symbol_;
        _mint(to, amount);
    }

    function name() public view override returns (string memory) {
        require(_ready, "not initialised");
        return _tokenName;
    }

    function symbol() public view override returns (string memory) {
        require(_ready, "not initialised");
        return _tokenSymbol;
    }

    function decimals() public view override returns (uint8) {
        require(_ready, "not initialised");
        return 18;
    }
}

/// Makes EIP-1167 clones with OpenZeppelin `Clones`, by CREATE and CREATE2.
contract CloneFactory {
    event Cloned(address clone);

    function clone(address implementation) external returns (address made) {
        made = Clones.clone(implementation);
        emit Cloned(made);
    }

    function cloneDeterministic(address implementation, bytes32 salt) external returns (address made) {
        made = Clones.cloneDeterministic(implementation, salt);
        emit Cloned(made);
    }

    function cloneAndInitialize(address implementation, string calldata name_, string calldata symbol_)
        external
        returns (address made)
    {
        made = Clones.clone(implementation);
        CloneableToken(made).initialize(name_, symbol_, msg.sender, 1e21);
        emit Cloned(made);
    }
}

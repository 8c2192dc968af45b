// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Counter} from "./Counter.sol";
import {DemoToken} from "./DemoToken.sol";

/// Created and destroyed in one transaction (EIP-6780 still removes such a contract).
contract Ephemeral {
    function destroy(address payable to) external {
        selfdestruct(to);
    }
}

/// Creates contracts from inside a transaction, so that only call traces reveal them.
contract Factory {
    event Made(address made);

    function make() external returns (address made) {
        made = address(new Counter());
        emit Made(made);
    }

    function make2(bytes32 salt) external returns (address made) {
        made = address(new Counter{salt: salt}());
        emit Made(made);
    }

    function makeToken(string calldata name, string calldata symbol) external returns (address made) {
        made = address(new DemoToken(name, symbol, 1e24));
        emit Made(made);
    }

    function makeAndDestroy() external {
        Ephemeral e = new Ephemeral();
        emit Made(address(e));
        e.destroy(payable(msg.sender));
    }

    /// Creates a contract in a call that reverts, inside a transaction that succeeds.
    function makeInFailingCall() external {
        try this.createThenRevert() {} catch {}
    }

    function createThenRevert() external {
        new Counter();
        revert("undone");
    }
}

/// Created with value, and destroyed paying it out.
contract Payer {
    constructor() payable {}

    function destroy(address payable to) external {
        selfdestruct(to);
    }
}

/// Moves ETH every way a transaction can below its top call: a call with value, CREATE and
/// CREATE2 with value, and a selfdestruct that pays out; and reverts with a reason.
contract InternalOps {
    function all(address payable to) external payable {
        (bool ok,) = to.call{value: msg.value / 4}("");
        require(ok, "transfer failed");
        Payer created = new Payer{value: msg.value / 4}();
        new Payer{value: msg.value / 4, salt: bytes32(uint256(1))}();
        created.destroy(to);
    }

    function fail() external pure {
        revert("nope");
    }
}

// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// A contract that can remove its own code.
contract Mortal {
    function destroy(address payable to) external {
        selfdestruct(to);
    }
}

/// Creates `Mortal` with CREATE2 at one address per salt, again after each removal: a contract
/// with several lifetimes at the same address. Since EIP-6780 a selfdestruct removes code only in
/// the creating transaction, so `make(salt, true)` creates and removes it in one transaction.
contract Recreator {
    event Made(address made);

    function make(bytes32 salt, bool remove) external {
        Mortal m = new Mortal{salt: salt}();
        emit Made(address(m));
        if (remove) {
            m.destroy(payable(msg.sender));
        }
    }
}

//! Accounts whose private keys the tests hold, for a node that unlocks one account or none
//! (`geth --dev`): legacy EIP-155 transactions signed here and sent with
//! `eth_sendRawTransaction`. The same keys, chain id, nonces and fees give byte-identical
//! transactions, so the same workload has the same transaction hashes on every node.

use alloy::primitives::{keccak256, Address, Bytes, U256};
use k256::ecdsa::SigningKey;

/// One account's key.
#[derive(Clone)]
pub struct LocalKey {
    key: SigningKey,
    /// Its address.
    pub address: Address,
}

impl std::fmt::Debug for LocalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LocalKey({})", self.address)
    }
}

/// What a legacy transaction carries, besides its signature.
#[derive(Debug, Clone)]
pub struct LegacyTx {
    pub nonce: u64,
    pub gas_price: u128,
    pub gas: u64,
    pub to: Option<Address>,
    pub value: U256,
    pub data: Bytes,
}

impl LocalKey {
    /// The `index`-th key of a fixed family: the same accounts on every run and every node.
    pub fn derive(family: &str, index: u64) -> Self {
        let secret = keccak256(format!("ots-indexer test key {family}/{index}"));
        let key = SigningKey::from_slice(secret.as_slice()).expect("a keccak digest is a valid key");
        let point = key.verifying_key().to_encoded_point(false);
        let address = Address::from_slice(&keccak256(&point.as_bytes()[1..])[12..]);
        Self { key, address }
    }

    /// `tx` signed for `chain_id` (EIP-155), in the bytes `eth_sendRawTransaction` takes.
    pub fn sign(&self, tx: &LegacyTx, chain_id: u64) -> Bytes {
        let mut fields = tx.fields();
        fields.extend([rlp_uint(&chain_id.to_be_bytes()), rlp_uint(&[]), rlp_uint(&[])]);
        let digest = keccak256(rlp_list(&fields));
        let (signature, recovery) = self.key.sign_prehash_recoverable(digest.as_slice()).expect("signs");
        let rs = signature.to_bytes();
        let v = chain_id * 2 + 35 + u64::from(recovery.is_y_odd());
        let mut fields = tx.fields();
        fields.extend([rlp_uint(&v.to_be_bytes()), rlp_uint(&rs[..32]), rlp_uint(&rs[32..])]);
        rlp_list(&fields).into()
    }
}

impl LegacyTx {
    fn fields(&self) -> Vec<Vec<u8>> {
        vec![
            rlp_uint(&self.nonce.to_be_bytes()),
            rlp_uint(&self.gas_price.to_be_bytes()),
            rlp_uint(&self.gas.to_be_bytes()),
            rlp_bytes(self.to.as_ref().map(|a| a.as_slice()).unwrap_or_default()),
            rlp_uint(&self.value.to_be_bytes::<32>()),
            rlp_bytes(&self.data),
        ]
    }
}

/// An integer given big-endian: RLP wants it without leading zeros.
fn rlp_uint(be: &[u8]) -> Vec<u8> {
    let start = be.iter().position(|b| *b != 0).unwrap_or(be.len());
    rlp_bytes(&be[start..])
}

fn rlp_bytes(bytes: &[u8]) -> Vec<u8> {
    match bytes {
        [b] if *b < 0x80 => vec![*b],
        _ => [rlp_length(bytes.len(), 0x80), bytes.to_vec()].concat(),
    }
}

fn rlp_list(items: &[Vec<u8>]) -> Vec<u8> {
    let payload = items.concat();
    [rlp_length(payload.len(), 0xc0), payload].concat()
}

fn rlp_length(len: usize, offset: u8) -> Vec<u8> {
    if len <= 55 {
        return vec![offset + len as u8];
    }
    let be = len.to_be_bytes();
    let start = be.iter().position(|b| *b != 0).unwrap_or(be.len() - 1);
    [vec![offset + 55 + (be.len() - start) as u8], be[start..].to_vec()].concat()
}

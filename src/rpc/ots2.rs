//! The `ots2_` namespace (spec §5.1): shapes and `(idx, count)` paging of Erigon's ots2.

use std::collections::BTreeMap;

use alloy_primitives::{Address, U64};
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use serde::Serialize;

use super::{
    errors::{db_error, invalid_params, server_error},
    materialize::{block_summaries, erc20_metadata, transactions, BlockSummary, TransactionWithReceipt},
    RpcContext,
};
use crate::{
    db::{codec::AttributeBit, tables::*, DbError},
    index::{
        address_index::{id_count, id_page},
        attributes::attributes,
        matches::{match_count, match_page, MAX_MATCH_PAGE},
    },
    txid::TxId,
};

/// A page of a list, with a summary of every block its results are in.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    /// Keyed by hex block number.
    pub blocks_summary: BTreeMap<String, BlockSummary>,
    /// The results, oldest first.
    pub results: Vec<T>,
}

/// A row of `getAllContractsList`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContractMatch {
    /// Deployment block, hex.
    pub block_number: U64,
    /// The contract.
    pub address: Address,
}

/// A row of `getERC20List`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Erc20Match {
    /// Deployment block, hex.
    pub block_number: U64,
    /// The token.
    pub address: Address,
    /// `name()` now, or `"<ERROR>"`.
    pub name: String,
    /// `symbol()` now, or `"<ERROR>"`.
    pub symbol: String,
    /// `decimals()` now, or 0.
    pub decimals: u8,
}

/// `getAddressAttributes`: each flag present only when set.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct AddressAttributes {
    /// ERC20 token.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub erc20: bool,
    /// ERC165.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub erc165: bool,
    /// ERC721 token.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub erc721: bool,
    /// ERC1155 token.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub erc1155: bool,
    /// EIP-1167 proxy.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub erc1167: bool,
}

/// `ots2_` methods.
#[rpc(server, namespace = "ots2")]
pub trait Ots2Api {
    /// Number of contracts deployed so far.
    #[method(name = "getAllContractsCount")]
    fn get_all_contracts_count(&self) -> RpcResult<u64>;

    /// Contracts `idx..idx+count` in deployment order (count ≤ 500).
    #[method(name = "getAllContractsList")]
    async fn get_all_contracts_list(&self, idx: u64, count: u64) -> RpcResult<Page<ContractMatch>>;

    /// Number of ERC20 tokens.
    #[method(name = "getERC20Count")]
    fn get_erc20_count(&self) -> RpcResult<u64>;

    /// ERC20 tokens `idx..idx+count` in deployment order (count ≤ 500), with metadata.
    #[method(name = "getERC20List")]
    async fn get_erc20_list(&self, idx: u64, count: u64) -> RpcResult<Page<Erc20Match>>;

    /// Which standards an address implements.
    #[method(name = "getAddressAttributes")]
    fn get_address_attributes(&self, address: Address) -> RpcResult<AddressAttributes>;

    /// Number of transactions with an ERC20 transfer from or to `address`.
    #[method(name = "getERC20TransferCount")]
    fn get_erc20_transfer_count(&self, address: Address) -> RpcResult<u64>;

    /// Those transactions `idx..idx+count`, oldest first, with their receipts.
    #[method(name = "getERC20TransferList")]
    async fn get_erc20_transfer_list(
        &self,
        address: Address,
        idx: u64,
        count: u64,
    ) -> RpcResult<Page<TransactionWithReceipt>>;
}

/// Implementation of [`Ots2ApiServer`].
#[derive(Debug, Clone)]
pub struct Ots2 {
    ctx: RpcContext,
}

impl Ots2 {
    /// Serves from `ctx`.
    pub const fn new(ctx: RpcContext) -> Self {
        Self { ctx }
    }

    fn read<T>(&self, f: impl FnOnce(&crate::db::ReadTxn) -> Result<T, DbError>) -> RpcResult<T> {
        let txn = self.ctx.db.begin_read().map_err(|e| db_error(&e))?;
        f(&txn).map_err(|e| db_error(&e))
    }

    fn check_match_page(count: u64) -> RpcResult<()> {
        if count > MAX_MATCH_PAGE {
            return Err(server_error(format!("maximum allowed results: {MAX_MATCH_PAGE}")));
        }
        Ok(())
    }

    fn check_address_page(&self, count: u64) -> RpcResult<()> {
        if count > self.ctx.max_page_size {
            return Err(invalid_params(format!(
                "count {count} is over the maximum page size {} (see --max-page-size)",
                self.ctx.max_page_size
            )));
        }
        Ok(())
    }
}

#[jsonrpsee::core::async_trait]
impl Ots2ApiServer for Ots2 {
    fn get_all_contracts_count(&self) -> RpcResult<u64> {
        self.read(match_count::<OtsAllContractsCounter, _>)
    }

    async fn get_all_contracts_list(&self, idx: u64, count: u64) -> RpcResult<Page<ContractMatch>> {
        Self::check_match_page(count)?;
        let rows = self.read(|t| match_page::<OtsAllContracts, OtsAllContractsCounter, _>(t, idx, count))?;
        let blocks_summary = block_summaries(&self.ctx.node, rows.iter().map(|(b, _)| *b)).await?;
        let results = rows
            .into_iter()
            .map(|(b, address)| ContractMatch { block_number: U64::from(b), address })
            .collect();
        Ok(Page { blocks_summary, results })
    }

    fn get_erc20_count(&self) -> RpcResult<u64> {
        self.read(match_count::<OtsERC20Counter, _>)
    }

    async fn get_erc20_list(&self, idx: u64, count: u64) -> RpcResult<Page<Erc20Match>> {
        Self::check_match_page(count)?;
        let rows = self.read(|t| match_page::<OtsERC20, OtsERC20Counter, _>(t, idx, count))?;
        let node = &self.ctx.node;
        let (blocks_summary, metadata) = futures::join!(
            block_summaries(node, rows.iter().map(|(b, _)| *b)),
            futures::future::join_all(rows.iter().map(|(_, a)| erc20_metadata(node, *a)))
        );
        let results = rows
            .into_iter()
            .zip(metadata)
            .map(|((b, address), (name, symbol, decimals))| Erc20Match {
                block_number: U64::from(b),
                address,
                name,
                symbol,
                decimals,
            })
            .collect();
        Ok(Page { blocks_summary: blocks_summary?, results })
    }

    fn get_address_attributes(&self, address: Address) -> RpcResult<AddressAttributes> {
        let attrs = self.read(|t| attributes(t, &address))?;
        Ok(AddressAttributes {
            erc20: attrs.has(AttributeBit::Erc20),
            erc165: attrs.has(AttributeBit::Erc165),
            erc721: attrs.has(AttributeBit::Erc721),
            erc1155: attrs.has(AttributeBit::Erc1155),
            erc1167: attrs.has(AttributeBit::Erc1167),
        })
    }

    fn get_erc20_transfer_count(&self, address: Address) -> RpcResult<u64> {
        self.read(|t| id_count::<OtsERC20TransferCounter, _>(t, &address))
    }

    async fn get_erc20_transfer_list(
        &self,
        address: Address,
        idx: u64,
        count: u64,
    ) -> RpcResult<Page<TransactionWithReceipt>> {
        self.check_address_page(count)?;
        let ids: Vec<TxId> = self
            .read(|t| id_page::<OtsERC20TransferIndex, OtsERC20TransferCounter, _>(t, &address, idx, count))?
            .into_iter()
            .map(TxId)
            .collect();
        let node = &self.ctx.node;
        let (blocks_summary, results) =
            futures::join!(block_summaries(node, ids.iter().map(|id| id.block())), transactions(node, &ids));
        Ok(Page { blocks_summary: blocks_summary?, results: results? })
    }
}

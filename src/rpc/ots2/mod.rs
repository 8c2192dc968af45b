//! The `ots2_` namespace (docs/api.md): shapes and `(idx, count)` paging of Erigon's ots2.

pub mod ext;
pub mod holders;
pub mod pending;
pub mod summary;

use std::collections::{BTreeMap, HashMap};

use alloy_primitives::{Address, Bytes, U64};
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use ots_classifiers::Standard;
use serde::Serialize;
use serde_json::{json, value::RawValue};

use crate::rpc::{
    errors::{db_error, invalid_params, node_error, server_error},
    materialize::{
        total_assets, BlockSummary, Materializer, RewardSummary, TransactionWithReceipt, WithdrawalRow,
    },
    page_timing::PageTimer,
    serialized::Serialized,
    transfer_detail::transfers_in,
    tx_cache::standings,
    RpcContext,
};
use crate::{
    db::{
        codec::{AttributeBit, ContractInfo},
        state, DbError,
    },
    decode::{TokenKind, TokenKinds},
    index::{
        address_index::{self, IdList},
        attributes::attributes,
        contract_info::contract_info,
        holdings,
        matches::{self, MAX_MATCH_PAGE},
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
    /// `name()` as classified, or `"<ERROR>"`.
    pub name: String,
    /// `symbol()` as classified, or `"<ERROR>"`.
    pub symbol: String,
    /// `decimals()` as classified, or 0.
    pub decimals: u8,
}

/// A row of `getERC721List` and `getERC1155List`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NamedMatch {
    /// Block the contract was classified in (its deployment block unless it was classified
    /// later, at its first Transfer), hex.
    pub block_number: U64,
    /// The token.
    pub address: Address,
    /// `name()` as classified, or `"<ERROR>"`.
    pub name: String,
    /// `symbol()` as classified, or `"<ERROR>"`.
    pub symbol: String,
}

/// A row of `getERC1167List`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxyMatch {
    /// Deployment block, hex.
    pub block_number: U64,
    /// The proxy.
    pub address: Address,
    /// The contract it delegates to.
    pub implementation: Address,
}

/// A row of `getERC4626List`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VaultMatch {
    /// Block the vault was classified in, hex.
    pub block_number: U64,
    /// The vault.
    pub address: Address,
    /// `name()` as classified, or `"<ERROR>"`.
    pub name: String,
    /// `symbol()` as classified, or `"<ERROR>"`.
    pub symbol: String,
    /// `decimals()` as classified, or 0.
    pub decimals: u8,
    /// `asset()` as classified.
    pub asset: Address,
    /// `totalAssets()` at the latest block, as a JSON number of any size; null if the call fails.
    pub total_assets: Option<Box<RawValue>>,
}

/// A row of `getBlocksRewardedList`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RewardedBlock {
    /// The block, hex.
    pub block_number: U64,
}

/// `getBlocksRewardedList`'s page: its summaries carry the fees (`BlockSummary2`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RewardedPage {
    /// Keyed by hex block number.
    pub blocks_summary: BTreeMap<String, RewardSummary>,
    /// The blocks, oldest first.
    pub results: Vec<RewardedBlock>,
}

/// One row of `getERC20Holdings` / `getERC721Holdings`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HoldingRow {
    /// The token.
    pub address: Address,
    /// The transaction id (`TxId`) of the holder's first transfer of it, as a JSON number.
    pub eth_tx: u64,
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

/// Stored text, or ots2's marker for a value that could not be read.
fn text(value: Option<String>) -> String {
    value.unwrap_or_else(|| "<ERROR>".to_owned())
}

fn named((block, address, info): (u64, Address, ContractInfo)) -> NamedMatch {
    NamedMatch { block_number: U64::from(block), address, name: text(info.name), symbol: text(info.symbol) }
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

    /// Number of ERC721 tokens.
    #[method(name = "getERC721Count")]
    fn get_erc721_count(&self) -> RpcResult<u64>;

    /// ERC721 tokens `idx..idx+count` in classification order (count ≤ 500), with metadata.
    #[method(name = "getERC721List")]
    async fn get_erc721_list(&self, idx: u64, count: u64) -> RpcResult<Page<NamedMatch>>;

    /// Number of ERC1155 tokens.
    #[method(name = "getERC1155Count")]
    fn get_erc1155_count(&self) -> RpcResult<u64>;

    /// ERC1155 tokens `idx..idx+count` in deployment order (count ≤ 500), with metadata.
    #[method(name = "getERC1155List")]
    async fn get_erc1155_list(&self, idx: u64, count: u64) -> RpcResult<Page<NamedMatch>>;

    /// Number of EIP-1167 minimal proxies.
    #[method(name = "getERC1167Count")]
    fn get_erc1167_count(&self) -> RpcResult<u64>;

    /// Minimal proxies `idx..idx+count` in deployment order (count ≤ 500), with implementation.
    #[method(name = "getERC1167List")]
    async fn get_erc1167_list(&self, idx: u64, count: u64) -> RpcResult<Page<ProxyMatch>>;

    /// The implementation behind a minimal proxy; an error naming the address for any other.
    #[method(name = "getERC1167Impl")]
    async fn get_erc1167_impl(&self, address: Address) -> RpcResult<Address>;

    /// Number of ERC4626 vaults.
    #[method(name = "getERC4626Count")]
    fn get_erc4626_count(&self) -> RpcResult<u64>;

    /// ERC4626 vaults `idx..idx+count` in classification order (count ≤ 500).
    #[method(name = "getERC4626List")]
    async fn get_erc4626_list(&self, idx: u64, count: u64) -> RpcResult<Page<VaultMatch>>;

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

    /// Number of transactions with an ERC721 transfer from or to `address`.
    #[method(name = "getERC721TransferCount")]
    fn get_erc721_transfer_count(&self, address: Address) -> RpcResult<u64>;

    /// Those transactions `idx..idx+count`, oldest first, with their receipts.
    #[method(name = "getERC721TransferList")]
    async fn get_erc721_transfer_list(
        &self,
        address: Address,
        idx: u64,
        count: u64,
    ) -> RpcResult<Page<TransactionWithReceipt>>;

    /// Number of blocks `address` was the fee recipient (coinbase) of.
    #[method(name = "getBlocksRewardedCount")]
    fn get_blocks_rewarded_count(&self, address: Address) -> RpcResult<u64>;

    /// Those blocks `idx..idx+count`, oldest first, with their fees.
    #[method(name = "getBlocksRewardedList")]
    async fn get_blocks_rewarded_list(
        &self,
        address: Address,
        idx: u64,
        count: u64,
    ) -> RpcResult<RewardedPage>;

    /// Number of consensus-layer withdrawals to `address`.
    #[method(name = "getWithdrawalsCount")]
    fn get_withdrawals_count(&self, address: Address) -> RpcResult<u64>;

    /// Those withdrawals `idx..idx+count`, oldest first.
    #[method(name = "getWithdrawalsList")]
    async fn get_withdrawals_list(
        &self,
        address: Address,
        idx: u64,
        count: u64,
    ) -> RpcResult<Page<WithdrawalRow>>;

    /// Number of transactions with an ERC1155 transfer from or to `address` (ours).
    #[method(name = "getERC1155TransferCount")]
    fn get_erc1155_transfer_count(&self, address: Address) -> RpcResult<u64>;

    /// Those transactions `idx..idx+count`, oldest first, with their receipts (ours).
    #[method(name = "getERC1155TransferList")]
    async fn get_erc1155_transfer_list(
        &self,
        address: Address,
        idx: u64,
        count: u64,
    ) -> RpcResult<Page<TransactionWithReceipt>>;

    /// Every ERC1155 token `address` ever sent or received, by token address (ours).
    #[method(name = "getERC1155Holdings")]
    fn get_erc1155_holdings(&self, address: Address) -> RpcResult<Serialized<Vec<HoldingRow>>>;

    /// Every ERC20 token `address` ever sent or received, by token address.
    #[method(name = "getERC20Holdings")]
    fn get_erc20_holdings(&self, address: Address) -> RpcResult<Serialized<Vec<HoldingRow>>>;

    /// Every ERC721 token `address` ever sent or received, by token address.
    #[method(name = "getERC721Holdings")]
    fn get_erc721_holdings(&self, address: Address) -> RpcResult<Serialized<Vec<HoldingRow>>>;
}

/// Implementation of [`Ots2ApiServer`].
#[derive(Debug, Clone)]
pub struct Ots2 {
    ctx: RpcContext,
    pages: Materializer,
}

impl Ots2 {
    /// Serves from `ctx`.
    pub fn new(ctx: RpcContext) -> Self {
        let pages = Materializer::new(ctx.node.clone(), ctx.tx_cache.clone());
        Self { ctx, pages }
    }

    fn read<T>(&self, f: impl FnOnce(&crate::db::ReadTxn) -> Result<T, DbError>) -> RpcResult<T> {
        let txn = self.ctx.db.begin_read().map_err(|e| db_error(&e))?;
        f(&txn).map_err(|e| db_error(&e))
    }

    /// As [`Self::read`], with the indexed tip read in the same snapshot.
    fn read_at_tip<T>(
        &self,
        f: impl FnOnce(&crate::db::ReadTxn) -> Result<T, DbError>,
    ) -> RpcResult<(T, Option<u64>)> {
        self.read(|t| {
            let tip = state::read_tip(t)?;
            Ok((f(t)?, tip))
        })
    }

    /// A page of a match table with each contract's stored metadata, and its block summaries.
    async fn described_page(
        &self,
        standard: Standard,
        idx: u64,
        count: u64,
    ) -> RpcResult<(BTreeMap<String, BlockSummary>, Vec<(u64, Address, ContractInfo)>)> {
        Self::check_match_page(count)?;
        let (rows, tip) = self.read_at_tip(|t| {
            matches::page(t, Some(standard), idx, count)?
                .into_iter()
                .map(|(b, a)| Ok((b, a, contract_info(t, &a)?.unwrap_or_default())))
                .collect::<Result<Vec<_>, DbError>>()
        })?;
        let blocks_summary = self.pages.summaries(rows.iter().map(|(b, _, _)| *b), tip).await?;
        Ok((blocks_summary, rows))
    }

    /// A page of an address's transfer transactions, materialised from the node.
    async fn transfer_page(
        &self,
        kind: TokenKind,
        address: Address,
        idx: u64,
        count: u64,
    ) -> RpcResult<Page<TransactionWithReceipt>> {
        self.check_address_page(count)?;
        let mut timer = PageTimer::start(match kind {
            TokenKind::Erc20 => "ots2_getERC20TransferList",
            TokenKind::Erc721 => "ots2_getERC721TransferList",
            TokenKind::Erc1155 => "ots2_getERC1155TransferList",
        });
        let list = IdList::of_transfers(kind);
        let ((ids, standings), tip) = self.read_at_tip(|t| {
            let ids: Vec<TxId> =
                address_index::page(t, list, &address, idx, count)?.into_iter().map(TxId).collect();
            let standings = standings(t, &ids)?;
            Ok((ids, standings))
        })?;
        timer.index_done(ids.len());
        let (blocks_summary, mut results) = self.pages.transactions(&ids, &standings, tip).await?;
        self.read(|t| {
            let mut kinds: HashMap<Address, TokenKinds> = HashMap::new();
            let mut failed = None;
            for r in &mut results {
                r.transfers = transfers_in(&r.receipt, kind, address, |token| {
                    *kinds.entry(*token).or_insert_with(|| match attributes(t, token) {
                        Ok(a) => TokenKinds::of(&a),
                        Err(e) => {
                            failed = Some(e);
                            TokenKinds::default()
                        }
                    })
                });
            }
            failed.map_or(Ok(()), Err)
        })?;
        Ok(Page { blocks_summary, results })
    }

    fn holdings(&self, kind: TokenKind, address: Address) -> RpcResult<Serialized<Vec<HoldingRow>>> {
        let dups = self.read(|t| holdings::of(t, kind, &address))?;
        Serialized::of(
            &dups.into_iter().map(|h| HoldingRow { address: h.token, eth_tx: h.first.0 }).collect(),
        )
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
        self.read(|t| matches::count(t, None))
    }

    async fn get_all_contracts_list(&self, idx: u64, count: u64) -> RpcResult<Page<ContractMatch>> {
        Self::check_match_page(count)?;
        let (rows, tip) = self.read_at_tip(|t| matches::page(t, None, idx, count))?;
        let blocks_summary = self.pages.summaries(rows.iter().map(|(b, _)| *b), tip).await?;
        let results = rows
            .into_iter()
            .map(|(b, address)| ContractMatch { block_number: U64::from(b), address })
            .collect();
        Ok(Page { blocks_summary, results })
    }

    fn get_erc20_count(&self) -> RpcResult<u64> {
        self.read(|t| matches::count(t, Some(Standard::Erc20)))
    }

    async fn get_erc20_list(&self, idx: u64, count: u64) -> RpcResult<Page<Erc20Match>> {
        let (blocks_summary, rows) = self.described_page(Standard::Erc20, idx, count).await?;
        let results = rows
            .into_iter()
            .map(|(b, address, info)| Erc20Match {
                block_number: U64::from(b),
                address,
                name: text(info.name),
                symbol: text(info.symbol),
                decimals: info.decimals.unwrap_or(0),
            })
            .collect();
        Ok(Page { blocks_summary, results })
    }

    fn get_erc721_count(&self) -> RpcResult<u64> {
        self.read(|t| matches::count(t, Some(Standard::Erc721)))
    }

    async fn get_erc721_list(&self, idx: u64, count: u64) -> RpcResult<Page<NamedMatch>> {
        let (blocks_summary, rows) = self.described_page(Standard::Erc721, idx, count).await?;
        Ok(Page { blocks_summary, results: rows.into_iter().map(named).collect() })
    }

    fn get_erc1155_count(&self) -> RpcResult<u64> {
        self.read(|t| matches::count(t, Some(Standard::Erc1155)))
    }

    async fn get_erc1155_list(&self, idx: u64, count: u64) -> RpcResult<Page<NamedMatch>> {
        let (blocks_summary, rows) = self.described_page(Standard::Erc1155, idx, count).await?;
        Ok(Page { blocks_summary, results: rows.into_iter().map(named).collect() })
    }

    fn get_erc1167_count(&self) -> RpcResult<u64> {
        self.read(|t| matches::count(t, Some(Standard::Erc1167)))
    }

    async fn get_erc1167_list(&self, idx: u64, count: u64) -> RpcResult<Page<ProxyMatch>> {
        let (blocks_summary, rows) = self.described_page(Standard::Erc1167, idx, count).await?;
        let results = rows
            .into_iter()
            .map(|(b, address, info)| ProxyMatch {
                block_number: U64::from(b),
                address,
                implementation: info.implementation.unwrap_or_default(),
            })
            .collect();
        Ok(Page { blocks_summary, results })
    }

    async fn get_erc1167_impl(&self, address: Address) -> RpcResult<Address> {
        let indexed = self.read(|t| {
            if !attributes(t, &address)?.has(AttributeBit::Erc1167) {
                return Ok(None);
            }
            Ok(contract_info(t, &address)?.and_then(|i| i.implementation))
        })?;
        if let Some(implementation) = indexed {
            return Ok(implementation);
        }
        // Not (yet) classified: a clone made where the node gave no call frames, or not indexed
        // yet. Its code at the head says what it is.
        let code: Bytes =
            self.ctx.node.raw("eth_getCode", json!([address, "latest"])).await.map_err(|e| node_error(&e))?;
        ots_classifiers::minimal_proxy_target(&code).ok_or_else(|| {
            server_error(format!(
                "{address} is not an ERC1167 minimal proxy: its code is not the 45-byte EIP-1167 pattern"
            ))
        })
    }

    fn get_erc4626_count(&self) -> RpcResult<u64> {
        self.read(|t| matches::count(t, Some(Standard::Erc4626)))
    }

    async fn get_erc4626_list(&self, idx: u64, count: u64) -> RpcResult<Page<VaultMatch>> {
        let (blocks_summary, rows) = self.described_page(Standard::Erc4626, idx, count).await?;
        let node = &self.ctx.node;
        let totals = futures::future::join_all(rows.iter().map(|(_, a, _)| total_assets(node, *a))).await;
        let results = rows
            .into_iter()
            .zip(totals)
            .map(|((b, address, info), total_assets)| VaultMatch {
                block_number: U64::from(b),
                address,
                name: text(info.name),
                symbol: text(info.symbol),
                decimals: info.decimals.unwrap_or(0),
                asset: info.asset.unwrap_or_default(),
                total_assets,
            })
            .collect();
        Ok(Page { blocks_summary, results })
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
        self.read(|t| address_index::count(t, IdList::Erc20Transfers, &address))
    }

    async fn get_erc20_transfer_list(
        &self,
        address: Address,
        idx: u64,
        count: u64,
    ) -> RpcResult<Page<TransactionWithReceipt>> {
        self.transfer_page(TokenKind::Erc20, address, idx, count).await
    }

    fn get_erc721_transfer_count(&self, address: Address) -> RpcResult<u64> {
        self.read(|t| address_index::count(t, IdList::Erc721Transfers, &address))
    }

    async fn get_erc721_transfer_list(
        &self,
        address: Address,
        idx: u64,
        count: u64,
    ) -> RpcResult<Page<TransactionWithReceipt>> {
        self.transfer_page(TokenKind::Erc721, address, idx, count).await
    }

    fn get_blocks_rewarded_count(&self, address: Address) -> RpcResult<u64> {
        self.read(|t| address_index::count(t, IdList::BlocksRewarded, &address))
    }

    async fn get_blocks_rewarded_list(
        &self,
        address: Address,
        idx: u64,
        count: u64,
    ) -> RpcResult<RewardedPage> {
        self.check_address_page(count)?;
        let (blocks, tip) =
            self.read_at_tip(|t| address_index::page(t, IdList::BlocksRewarded, &address, idx, count))?;
        let blocks_summary = self.pages.reward_summaries(blocks.iter().copied(), tip).await?;
        let results = blocks.into_iter().map(|b| RewardedBlock { block_number: U64::from(b) }).collect();
        Ok(RewardedPage { blocks_summary, results })
    }

    fn get_withdrawals_count(&self, address: Address) -> RpcResult<u64> {
        self.read(|t| address_index::count(t, IdList::Withdrawals, &address))
    }

    async fn get_withdrawals_list(
        &self,
        address: Address,
        idx: u64,
        count: u64,
    ) -> RpcResult<Page<WithdrawalRow>> {
        self.check_address_page(count)?;
        let (wanted, tip) = self.read_at_tip(|t| {
            let indexes = address_index::page(t, IdList::Withdrawals, &address, idx, count)?;
            address_index::withdrawal_blocks(t, indexes)
        })?;
        let (blocks_summary, results) = self.pages.withdrawal_rows(&wanted, tip).await?;
        Ok(Page { blocks_summary, results })
    }

    fn get_erc1155_transfer_count(&self, address: Address) -> RpcResult<u64> {
        self.read(|t| address_index::count(t, IdList::Erc1155Transfers, &address))
    }

    async fn get_erc1155_transfer_list(
        &self,
        address: Address,
        idx: u64,
        count: u64,
    ) -> RpcResult<Page<TransactionWithReceipt>> {
        self.transfer_page(TokenKind::Erc1155, address, idx, count).await
    }

    fn get_erc1155_holdings(&self, address: Address) -> RpcResult<Serialized<Vec<HoldingRow>>> {
        self.holdings(TokenKind::Erc1155, address)
    }

    fn get_erc20_holdings(&self, address: Address) -> RpcResult<Serialized<Vec<HoldingRow>>> {
        self.holdings(TokenKind::Erc20, address)
    }

    fn get_erc721_holdings(&self, address: Address) -> RpcResult<Serialized<Vec<HoldingRow>>> {
        self.holdings(TokenKind::Erc721, address)
    }
}

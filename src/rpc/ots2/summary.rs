//! `ots2_getAddressSummary`: what an explorer's address page heads with — how many transactions,
//! how much ether in and out, when first and last active, token activity, and for a contract its
//! creator and lifetimes — from the index in one read snapshot; the node is asked only for the
//! hashes of the creating and removing transactions.

use alloy_primitives::{Address, B256, U256, U64};
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use serde::Serialize;
use serde_json::{json, Value};

use crate::{
    db::{
        codec::{BlockNumber, Count},
        state::{self, CallFrames},
        tables::OtsWithdrawalIdx2Block,
        DbError, ReadTxn,
    },
    decode::TokenKind,
    index::{
        address_index::{self, IdList},
        appearances::{self, ListCounts},
        balances, holdings, lifetimes, totals,
    },
    rpc::{
        errors::{db_error, node_error, server_error},
        RpcContext,
    },
    txid::TxId,
};

/// Counts of an address's transactions.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TransactionCounts {
    /// Every transaction it appears in, as `ots_searchTransactions*` pages them.
    pub all: U64,
    /// Those it sent.
    pub sent: U64,
    /// Those it received at the top level (recipient, or the contract created) without sending.
    pub received: U64,
    /// Those it appears in only inside call frames.
    pub internal_only: U64,
}

/// Wei moved, in all.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EtherTotals {
    /// Received by successful value transfers at any depth (top level only without call frames).
    pub received: U256,
    /// Sent the same way.
    pub sent: U256,
    /// Paid in fees as a sender.
    pub fees_paid: U256,
    /// Received by withdrawals.
    pub withdrawn: U256,
    /// How many withdrawals.
    pub withdrawals: U64,
}

/// Token activity.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TokenActivity {
    /// Transactions with an ERC20 transfer to or from it.
    pub erc20_transfers: U64,
    /// Likewise ERC721.
    pub erc721_transfers: U64,
    /// Likewise ERC1155.
    pub erc1155_transfers: U64,
    /// ERC20 tokens it holds a non-zero balance of now.
    pub erc20_held: U64,
    /// ERC721 tokens it holds at least one id of now.
    pub erc721_held: U64,
    /// ERC1155 tokens it holds some id of now.
    pub erc1155_held: U64,
}

/// A transaction named by position, with its hash from the node.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TxRef {
    /// Its hash.
    pub transaction_hash: Option<B256>,
    /// Its block.
    pub block_number: U64,
    /// Its index in the block.
    pub transaction_index: U64,
}

/// A contract's creation and lifetimes.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ContractLifetime {
    /// Who created the current lifetime: the sender, or the factory contract.
    pub creator: Address,
    /// The transaction that created it.
    pub creation: TxRef,
    /// The transaction whose selfdestruct removed its code, if the current lifetime ended.
    pub removal: Option<TxRef>,
    /// How many times a contract was created at this address.
    pub lifetimes: U64,
}

/// The answer.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AddressSummary {
    /// The address.
    pub address: Address,
    /// Whether the counts and totals include call frames: `all`, `none` (a node without a
    /// tracer: top-level transactions only, `internalOnly` is 0), `partial`, or `unknown`.
    pub call_frames: CallFrames,
    /// Transactions.
    pub transactions: TransactionCounts,
    /// Ether.
    pub ether: EtherTotals,
    /// The first block it is active in (a transaction, a withdrawal, a block rewarded).
    pub first_active_block: Option<U64>,
    /// The last such block.
    pub last_active_block: Option<U64>,
    /// Token activity.
    pub tokens: TokenActivity,
    /// For an address the index saw created: its creation and lifetimes.
    pub contract: Option<ContractLifetime>,
}

/// The summary method.
#[rpc(server, namespace = "ots2")]
pub trait Ots2SummaryApi {
    /// What the index knows of `address` (docs/api.md).
    #[method(name = "getAddressSummary")]
    async fn get_address_summary(&self, address: Address) -> RpcResult<AddressSummary>;
}

/// Implementation of [`Ots2SummaryApiServer`].
#[derive(Debug, Clone)]
pub struct Ots2Summary {
    ctx: RpcContext,
}

impl Ots2Summary {
    /// Serves from `ctx`.
    pub const fn new(ctx: RpcContext) -> Self {
        Self { ctx }
    }

    async fn hash_of(&self, id: TxId) -> RpcResult<TxRef> {
        let hex = |n: u64| format!("{n:#x}");
        let tx: Value = self
            .ctx
            .node
            .raw("eth_getTransactionByBlockNumberAndIndex", json!([hex(id.block()), hex(id.index())]))
            .await
            .map_err(|e| node_error(&e))?;
        let transaction_hash = match tx.get("hash") {
            None => None,
            Some(h) => Some(
                serde_json::from_value(h.clone())
                    .map_err(|e| server_error(format!("the node gave a malformed transaction hash: {e}")))?,
            ),
        };
        Ok(TxRef {
            transaction_hash,
            block_number: U64::from(id.block()),
            transaction_index: U64::from(id.index()),
        })
    }
}

/// What the summary reads from the index, before the node names the transactions.
struct Read {
    summary: AddressSummary,
    creation: Option<(Address, TxId, u64)>,
    removal: Option<TxId>,
}

/// The block holding withdrawal `index`.
fn withdrawal_block(txn: &ReadTxn, index: u64) -> Result<Option<u64>, DbError> {
    Ok(txn.cursor::<OtsWithdrawalIdx2Block>()?.seek(&Count(index))?.map(|(_, BlockNumber(b))| b))
}

/// Tokens of `kind` that `holder` has a non-zero balance of.
fn held(txn: &ReadTxn, kind: TokenKind, holder: &Address) -> Result<u64, DbError> {
    let mut n = 0;
    for holding in holdings::of(txn, kind, holder)? {
        if !balances::balance(txn, holding.token, *holder)?.is_zero() {
            n += 1;
        }
    }
    Ok(n)
}

fn read(txn: &ReadTxn, address: Address) -> Result<Read, DbError> {
    let ListCounts { all, sent } = appearances::counts(txn, &address)?;
    let totals = totals::of(txn, &address)?;
    let count = |list| address_index::count(txn, list, &address);
    let withdrawals = count(IdList::Withdrawals)?;
    let mut active: Vec<u64> = Vec::new();
    if let Some((first, last)) = appearances::ends(txn, &address)? {
        active.extend([TxId(first).block(), TxId(last).block()]);
    }
    let rewarded = count(IdList::BlocksRewarded)?;
    if rewarded > 0 {
        for idx in [0, rewarded - 1] {
            active.extend(address_index::page(txn, IdList::BlocksRewarded, &address, idx, 1)?);
        }
    }
    if withdrawals > 0 {
        for idx in [0, withdrawals - 1] {
            for index in address_index::page(txn, IdList::Withdrawals, &address, idx, 1)? {
                active.extend(withdrawal_block(txn, index)?);
            }
        }
    }
    let life = lifetimes::of(txn, &address)?;
    let summary = AddressSummary {
        address,
        call_frames: state::read_call_frames(txn)?,
        transactions: TransactionCounts {
            all: U64::from(all),
            sent: U64::from(sent),
            received: U64::from(totals.top_level_in),
            internal_only: U64::from(all.saturating_sub(sent).saturating_sub(totals.top_level_in)),
        },
        ether: EtherTotals {
            received: totals.received,
            sent: totals.sent,
            fees_paid: totals.fees,
            withdrawn: totals.withdrawn,
            withdrawals: U64::from(withdrawals),
        },
        first_active_block: active.iter().min().copied().map(U64::from),
        last_active_block: active.iter().max().copied().map(U64::from),
        tokens: TokenActivity {
            erc20_transfers: U64::from(count(IdList::Erc20Transfers)?),
            erc721_transfers: U64::from(count(IdList::Erc721Transfers)?),
            erc1155_transfers: U64::from(count(IdList::Erc1155Transfers)?),
            erc20_held: U64::from(held(txn, TokenKind::Erc20, &address)?),
            erc721_held: U64::from(held(txn, TokenKind::Erc721, &address)?),
            erc1155_held: U64::from(held(txn, TokenKind::Erc1155, &address)?),
        },
        contract: None,
    };
    Ok(Read {
        summary,
        creation: life.current.map(|c| (c.creator, c.tx, life.creations)),
        removal: life.removed,
    })
}

#[jsonrpsee::core::async_trait]
impl Ots2SummaryApiServer for Ots2Summary {
    async fn get_address_summary(&self, address: Address) -> RpcResult<AddressSummary> {
        let Read { mut summary, creation, removal } = {
            let txn = self.ctx.db.begin_read().map_err(|e| db_error(&e))?;
            read(&txn, address).map_err(|e| db_error(&e))?
        };
        if let Some((creator, tx, lifetimes)) = creation {
            let removal = match removal {
                Some(r) => Some(self.hash_of(r).await?),
                None => None,
            };
            summary.contract = Some(ContractLifetime {
                creator,
                creation: self.hash_of(tx).await?,
                removal,
                lifetimes: U64::from(lifetimes),
            });
        }
        Ok(summary)
    }
}

//! Our holder methods: who holds a token and how much, from Transfer logs; and a holder's
//! tokens a page at a time.

use alloy_primitives::{Address, U256};
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use serde::Serialize;

use crate::rpc::{
    errors::{db_error, invalid_params},
    serialized::Serialized,
    RpcContext,
};
use crate::{
    db::{DbError, ReadTxn},
    decode::TokenKind,
    index::{
        balances::{multi_balances, owner},
        holdings,
    },
    rpc::ots2::HoldingRow,
};

/// One holder of `getTokenHolders`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Holder {
    /// The holder.
    pub holder: Address,
    /// Its balance, hex (ERC721: the number of ids it holds; ERC1155: its units over all ids).
    pub balance: U256,
}

/// A page of holders with the exact total.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct HolderPage {
    /// Holders with a non-zero balance.
    pub total: u64,
    /// Holders `idx..idx+count`, largest balance first.
    pub results: Vec<Holder>,
}

/// Holder methods (ours).
#[rpc(server, namespace = "ots2")]
pub trait Ots2HoldersApi {
    /// Number of addresses holding a non-zero balance of an ERC20, ERC721 or ERC1155 token.
    #[method(name = "getTokenHolderCount")]
    fn get_token_holder_count(&self, token: Address) -> RpcResult<u64>;

    /// Holders `idx..idx+count` of a token by balance, largest first.
    #[method(name = "getTokenHolders")]
    fn get_token_holders(&self, token: Address, idx: u64, count: u64) -> RpcResult<Serialized<HolderPage>>;

    /// The owner of an ERC721 token id; null if it was never minted or is burnt.
    #[method(name = "getERC721Owner")]
    fn get_erc721_owner(&self, token: Address, token_id: U256) -> RpcResult<Option<Address>>;

    /// Every id of an ERC1155 token that `holder` holds, with its balance, by id.
    #[method(name = "getERC1155Balances")]
    fn get_erc1155_balances(&self, token: Address, holder: Address) -> RpcResult<Vec<IdBalance>>;

    /// `getERC20Holdings` a page at a time: the number of ERC20 tokens `holder` has held, and
    /// those at positions `idx..idx+count` by token address.
    #[method(name = "getERC20HoldingsPage")]
    fn get_erc20_holdings_page(&self, holder: Address, idx: u64, count: u64) -> RpcResult<HoldingsPage>;

    /// `getERC721Holdings` a page at a time.
    #[method(name = "getERC721HoldingsPage")]
    fn get_erc721_holdings_page(&self, holder: Address, idx: u64, count: u64) -> RpcResult<HoldingsPage>;

    /// `getERC1155Holdings` a page at a time.
    #[method(name = "getERC1155HoldingsPage")]
    fn get_erc1155_holdings_page(&self, holder: Address, idx: u64, count: u64) -> RpcResult<HoldingsPage>;
}

/// A page of a holder's tokens with the exact total.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct HoldingsPage {
    /// Tokens the holder has held.
    pub total: u64,
    /// Tokens `idx..idx+count` by token address, each as `getERC20Holdings` gives it.
    pub results: Vec<HoldingRow>,
}

/// One id of `getERC1155Balances`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct IdBalance {
    /// The token id, hex.
    pub token_id: U256,
    /// Its balance, hex.
    pub balance: U256,
}

/// Implementation of [`Ots2HoldersApiServer`].
#[derive(Debug, Clone)]
pub struct Ots2Holders {
    ctx: RpcContext,
}

impl Ots2Holders {
    /// Serves from `ctx`.
    pub const fn new(ctx: RpcContext) -> Self {
        Self { ctx }
    }

    fn read<T>(&self, f: impl FnOnce(&ReadTxn) -> Result<T, DbError>) -> RpcResult<T> {
        let txn = self.ctx.db.begin_read().map_err(|e| db_error(&e))?;
        f(&txn).map_err(|e| db_error(&e))
    }

    fn check_count(&self, count: u64) -> RpcResult<()> {
        if count > self.ctx.max_page_size {
            return Err(invalid_params(format!(
                "count {count} is over the maximum page size {} (see --max-page-size)",
                self.ctx.max_page_size
            )));
        }
        Ok(())
    }

    fn holdings_page(
        &self,
        kind: TokenKind,
        holder: Address,
        idx: u64,
        count: u64,
    ) -> RpcResult<HoldingsPage> {
        self.check_count(count)?;
        let (total, rows) = self.read(|t| holdings::page(t, kind, &holder, idx, count))?;
        let results = rows.into_iter().map(|h| HoldingRow { address: h.token, eth_tx: h.first.0 }).collect();
        Ok(HoldingsPage { total, results })
    }
}

impl Ots2HoldersApiServer for Ots2Holders {
    fn get_token_holder_count(&self, token: Address) -> RpcResult<u64> {
        self.read(|t| self.ctx.window_holders.count(t, &token))
    }

    fn get_token_holders(&self, token: Address, idx: u64, count: u64) -> RpcResult<Serialized<HolderPage>> {
        self.check_count(count)?;
        let page = self.read(|t| {
            let total = self.ctx.window_holders.count(t, &token)?;
            let results = self
                .ctx
                .window_holders
                .page(t, &token, idx, count)?
                .into_iter()
                .map(|(holder, balance)| Holder { holder, balance })
                .collect();
            Ok(HolderPage { total, results })
        })?;
        Serialized::of(&page)
    }

    fn get_erc721_owner(&self, token: Address, token_id: U256) -> RpcResult<Option<Address>> {
        self.read(|t| owner(t, token, token_id))
    }

    fn get_erc1155_balances(&self, token: Address, holder: Address) -> RpcResult<Vec<IdBalance>> {
        let ids = self.read(|t| multi_balances(t, token, holder))?;
        Ok(ids.into_iter().map(|(token_id, balance)| IdBalance { token_id, balance }).collect())
    }

    fn get_erc20_holdings_page(&self, holder: Address, idx: u64, count: u64) -> RpcResult<HoldingsPage> {
        self.holdings_page(TokenKind::Erc20, holder, idx, count)
    }

    fn get_erc721_holdings_page(&self, holder: Address, idx: u64, count: u64) -> RpcResult<HoldingsPage> {
        self.holdings_page(TokenKind::Erc721, holder, idx, count)
    }

    fn get_erc1155_holdings_page(&self, holder: Address, idx: u64, count: u64) -> RpcResult<HoldingsPage> {
        self.holdings_page(TokenKind::Erc1155, holder, idx, count)
    }
}

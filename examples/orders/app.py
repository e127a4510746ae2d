"""The order desk and its agent contract: constrained, nested inputs.

An ordinary Elm program (a Model of orders, a union of Messages, an
``update`` whose commands stand in for a warehouse) that runs on
:func:`agentfx.program.run_program`, and :data:`AppAgent`, the contract that
lets agents place orders, cancel them and change their priority. Where the
todo example keeps its inputs flat, this one exercises what a real contract
declares: a list of line items whose SKUs follow a pattern and whose
quantities are bounded, a nested shipping address, a ``Literal`` priority, an
optional note with a length limit, a capability that exists only while some
order is open, and authorization by the caller's role.

The application half knows nothing of agents: deleting every line below "The
agent contract" leaves a working program.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from agentfx.completion import CallInfo, Completion
from agentfx.builder import for_model
from agentfx.contract import AuthorizationRequest
from agentfx.errors import Refusal
from agentfx.hints import Hints
from agentfx.program import Command

__all__ = [
    "INITIAL",
    "Address",
    "AppAgent",
    "CancelOrderInput",
    "CancelledOrder",
    "ChangedPriority",
    "Customer",
    "FailedCancelOrder",
    "LineItem",
    "Message",
    "Model",
    "Order",
    "OrdersAgent",
    "OrdersView",
    "PlaceOrderInput",
    "PlacedOrder",
    "Priority",
    "RejectedOrder",
    "RequestedCancelOrder",
    "RequestedPlaceOrder",
    "Role",
    "ShippedOrder",
    "Status",
    "update",
]


# --- The application ------------------------------------------------------------

Sku = Annotated[str, Meta(pattern=r"^[A-Z]{3}-[0-9]{4}$", description="A stock keeping unit such as ABC-1234")]
Quantity = Annotated[int, Meta(ge=1, le=99)]
Priority = Literal["standard", "express", "overnight"]
Status = Literal["open", "shipped", "cancelled"]
Role = Literal["viewer", "customer", "clerk"]

MAX_QUANTITY_IN_STOCK = 500
"""The stand-in warehouse rejects an order asking for more units than this in total."""


class LineItem(msgspec.Struct, frozen=True):
    """One product on an order and how many of it."""

    sku: Sku
    quantity: Quantity


class Address(msgspec.Struct, frozen=True):
    """Where an order ships."""

    name: Annotated[str, Meta(min_length=1, max_length=80)]
    street: Annotated[str, Meta(min_length=1, max_length=120)]
    city: Annotated[str, Meta(min_length=1, max_length=80)]
    postal_code: Annotated[str, Meta(pattern=r"^[0-9A-Z][0-9A-Z -]{1,8}[0-9A-Z]$")]
    country: Annotated[str, Meta(pattern=r"^[A-Z]{2}$", description="ISO 3166-1 alpha-2 country code")]


class Order(msgspec.Struct, frozen=True):
    """An order as the desk keeps it."""

    id: str
    customer_id: str
    items: tuple[LineItem, ...]
    shipping: Address
    priority: Priority = "standard"
    note: str | None = None
    status: Status = "open"


class Model(msgspec.Struct, frozen=True):
    """The whole application state: every order the desk knows."""

    orders: tuple[Order, ...] = ()


class Customer(msgspec.Struct, frozen=True):
    """Who is calling: the principal an agent acts for.

    A ``viewer`` may look but not act; a ``customer`` places orders and
    cancels their own; a ``clerk`` may cancel any order and change priorities.
    """

    id: str
    role: Role = "customer"


class RequestedPlaceOrder(msgspec.Struct, frozen=True, tag=True):
    """Someone asked to place an order; ``request_id`` follows it to :class:`PlacedOrder`."""

    customer_id: str
    items: tuple[LineItem, ...]
    shipping: Address
    priority: Priority = "standard"
    note: str | None = None
    request_id: str | None = None


class PlacedOrder(msgspec.Struct, frozen=True, tag=True):
    """The warehouse accepted an order."""

    order: Order
    request_id: str | None = None


class RejectedOrder(msgspec.Struct, frozen=True, tag=True):
    """The warehouse refused an order."""

    reason: str
    request_id: str | None = None


class RequestedCancelOrder(msgspec.Struct, frozen=True, tag=True):
    """Someone asked to cancel an order."""

    order_id: str
    reason: str


class CancelledOrder(msgspec.Struct, frozen=True, tag=True):
    """The warehouse cancelled an order."""

    order_id: str


class FailedCancelOrder(msgspec.Struct, frozen=True, tag=True):
    """The warehouse could not cancel an order (unknown, or no longer open)."""

    order_id: str
    reason: str


class ChangedPriority(msgspec.Struct, frozen=True, tag=True):
    """Change how fast an open order ships."""

    order_id: str
    priority: Priority


class ShippedOrder(msgspec.Struct, frozen=True, tag=True):
    """The warehouse shipped an order; never offered to agents."""

    order_id: str


Message = (
    RequestedPlaceOrder
    | PlacedOrder
    | RejectedOrder
    | RequestedCancelOrder
    | CancelledOrder
    | FailedCancelOrder
    | ChangedPriority
    | ShippedOrder
)

_HOME = Address(name="Ada Lovelace", street="12 St James's Square", city="London", postal_code="SW1Y 4JH", country="GB")

INITIAL = Model(
    orders=(
        Order(id="order-1", customer_id="ada", items=(LineItem(sku="TEA-0001", quantity=2),), shipping=_HOME),
        Order(
            id="order-2",
            customer_id="ada",
            items=(LineItem(sku="CUP-0042", quantity=6),),
            shipping=_HOME,
            status="shipped",
        ),
    ),
)
"""A Model with one open and one shipped order, both Ada's."""

# The stand-in warehouse numbers orders like a database sequence.
_ids = itertools.count(len(INITIAL.orders) + 1)


def _place(message: RequestedPlaceOrder) -> Command[Message]:
    async def place() -> Message:
        units = sum(item.quantity for item in message.items)
        if units > MAX_QUANTITY_IN_STOCK:
            return RejectedOrder(reason=f"Only {MAX_QUANTITY_IN_STOCK} units are in stock", request_id=message.request_id)
        order = Order(
            id=f"order-{next(_ids)}",
            customer_id=message.customer_id,
            items=message.items,
            shipping=message.shipping,
            priority=message.priority,
            note=message.note,
        )
        return PlacedOrder(order=order, request_id=message.request_id)

    return place


def _cancel(model: Model, order_id: str) -> Command[Message]:
    order = next((o for o in model.orders if o.id == order_id), None)

    async def cancel() -> Message:
        if order is None:
            return FailedCancelOrder(order_id=order_id, reason=f'There is no order with id "{order_id}"')
        if order.status != "open":
            return FailedCancelOrder(order_id=order_id, reason=f'Order "{order_id}" is already {order.status}')
        return CancelledOrder(order_id=order_id)

    return cancel


def _with_status(model: Model, order_id: str, status: Status) -> Model:
    orders = tuple(msgspec.structs.replace(o, status=status) if o.id == order_id else o for o in model.orders)
    return Model(orders=orders)


def update(model: Model, message: Message) -> Model | tuple[Model, list[Command[Message]]]:
    """The next Model, and the commands (warehouse calls) ``message`` starts.

    Placing and cancelling go through a command, so their result arrives as a
    later Message, which is what the contract's completions wait for.
    """
    match message:
        case RequestedPlaceOrder():
            return model, [_place(message)]
        case PlacedOrder(order=order):
            return Model(orders=(*model.orders, order))
        case RejectedOrder():
            return model
        case RequestedCancelOrder(order_id=order_id):
            return model, [_cancel(model, order_id)]
        case CancelledOrder(order_id=order_id):
            return _with_status(model, order_id, "cancelled")
        case FailedCancelOrder():
            return model
        case ChangedPriority(order_id=order_id, priority=priority):
            orders = tuple(
                msgspec.structs.replace(o, priority=priority) if o.id == order_id and o.status == "open" else o
                for o in model.orders
            )
            return Model(orders=orders)
        case ShippedOrder(order_id=order_id):
            return _with_status(model, order_id, "shipped")


# --- The agent contract ---------------------------------------------------------


# Struct docstrings become the "description" of the JSON Schemas agents read,
# so the ones below (and those of exposed Messages) are written for agents.


class PlaceOrderInput(msgspec.Struct, frozen=True):
    """The order to place for the calling customer."""

    items: Annotated[list[LineItem], Meta(min_length=1, max_length=20)]
    shipping: Address
    priority: Priority = "standard"
    note: Annotated[str, Meta(max_length=280)] | None = None


class CancelOrderInput(msgspec.Struct, frozen=True):
    """The order to cancel, and why."""

    order_id: str
    reason: Annotated[str, Meta(min_length=1, max_length=200)]


class OrdersView(msgspec.Struct, frozen=True):
    """The orders the desk knows, with their status."""

    orders: tuple[Order, ...]


def _has_open_order(model: Model) -> bool:
    return any(order.status == "open" for order in model.orders)


def _may_place(req: AuthorizationRequest[Customer, PlaceOrderInput, Model]) -> bool | Refusal:
    if req.principal.role == "viewer":
        return Refusal("Viewers cannot place orders")
    return True


def _may_cancel(req: AuthorizationRequest[Customer, CancelOrderInput, Model]) -> bool | Refusal:
    principal = req.principal
    if principal.role == "clerk":
        return True
    if principal.role == "viewer":
        return Refusal("Viewers cannot cancel orders")
    # A customer may cancel their own orders only; an unknown id is the
    # warehouse's to report, as it would be for a clerk.
    order = next((o for o in req.model.orders if o.id == req.input.order_id), None)
    if order is not None and order.customer_id != principal.id:
        return Refusal("Customers can only cancel their own orders")
    return True


def _may_change_priority(req: AuthorizationRequest[Customer, ChangedPriority, Model]) -> bool | Refusal:
    return req.principal.role == "clerk" or Refusal("Only clerks can change an order's priority")


def _placed_request(_: PlaceOrderInput, call: CallInfo) -> str | None:
    return call.invocation.id


def _placed_result(result: PlacedOrder | RejectedOrder) -> str | None:
    return result.request_id


OrdersAgent = for_model(Model, principal=Customer)

AppAgent = OrdersAgent.define(
    messages=OrdersAgent.expose(
        Message,
        OrdersAgent.variant(
            RequestedPlaceOrder,
            "Place an order for the calling customer",
            name="place_order",
            title="Place order",
            # Each call places another order, with the warehouse beyond the desk.
            hints=Hints(read_only=False, destructive=False, idempotent=False, open_world=True),
            input=PlaceOrderInput,
            # The invocation id rides onto the warehouse's answer, so two
            # identical orders placed at once each settle their own call.
            to_message=lambda order, ctx: RequestedPlaceOrder(
                customer_id=ctx.principal.id,
                items=tuple(order.items),
                shipping=order.shipping,
                priority=order.priority,
                note=order.note,
                request_id=ctx.invocation.id,
            ),
            authorize=_may_place,
            completion=Completion(
                success=PlacedOrder,
                failure=RejectedOrder,
                correlate_key=(_placed_request, _placed_result),
                timeout=10.0,
            ),
        ),
        OrdersAgent.variant(
            RequestedCancelOrder,
            "Cancel an open order",
            name="cancel_order",
            title="Cancel order",
            hints=Hints(read_only=False, destructive=True, idempotent=True),
            available=_has_open_order,
            input=CancelOrderInput,
            to_message=lambda cancel, ctx: RequestedCancelOrder(order_id=cancel.order_id, reason=cancel.reason),
            authorize=_may_cancel,
            completion=Completion(
                success=CancelledOrder,
                failure=FailedCancelOrder,
                correlate=lambda request, result, call: result.order_id == request.order_id,
                timeout=10.0,
            ),
        ),
        OrdersAgent.variant(
            ChangedPriority,
            "Change how fast an open order ships",
            name="change_priority",
            title="Change priority",
            hints=Hints(read_only=False, destructive=False, idempotent=True),
            available=_has_open_order,
            authorize=_may_change_priority,
        ),
    ),
    resources=[
        OrdersAgent.resource("orders", "Every order the desk knows", schema=list[Order], read=lambda m: m.orders),
    ],
    context=OrdersAgent.projection(OrdersView, lambda m: OrdersView(orders=m.orders)),
)
"""The contract: three capabilities, the ``orders`` resource and the :class:`OrdersView` context."""

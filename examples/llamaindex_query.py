"""A LlamaIndex query engine with promptslim's node postprocessor, offline.

A VectorStoreIndex over in-memory nodes with llama-index-core's MockEmbedding (no model
download) over-fetches; ``PromptSlimPostprocessor`` runs promptslim's retrieval stage (BM25
scoring, no model) and keeps the nodes worth their tokens, same node objects, new scores.
MockLLM is the sink. The chat-history helper then fits a conversation into a budget.

    python examples/llamaindex_query.py
"""

from __future__ import annotations

from llama_index.core import Settings, VectorStoreIndex
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.schema import TextNode

from promptslim import STAGES, Budget
from promptslim.integrations.llamaindex import PromptSlimPostprocessor, slim_chat_history

TEXTS = {
    "eiffel": "The Eiffel Tower is 330 metres tall and stands in Paris.",
    "paris": "Paris is the capital of France, on the Seine.",
    "louvre": "The Louvre in Paris is the most visited museum in the world.",
    "everest": "Mount Everest is 8,849 metres high, on the Nepal-China border.",
    "seine": "The Seine flows 777 kilometres through northern France.",
    "banana": "Bananas are rich in potassium.",
}


def main() -> None:
    Settings.embed_model = MockEmbedding(embed_dim=16)
    Settings.llm = MockLLM(max_tokens=16)
    nodes = [TextNode(text=t, id_=k, metadata={"source": k}) for k, t in TEXTS.items()]
    index = VectorStoreIndex(nodes)

    postprocessor = PromptSlimPostprocessor(
        stage=STAGES.get("retrieval")(scorer="bm25", max_k=2), budget=Budget(documents=120)
    )
    engine = index.as_query_engine(
        similarity_top_k=len(TEXTS),  # over-fetch on purpose: promptslim decides what is kept
        node_postprocessors=[postprocessor],
    )
    response = engine.query("How tall is the Eiffel Tower?")
    print("--- nodes kept by promptslim")
    for n in response.source_nodes:
        print(f"{n.score:.3f}  {n.node.node_id}  {n.node.metadata}  {n.node.get_content()}")
    print("--- answer (MockLLM)")
    print(str(response)[:80])

    history = [ChatMessage(role=MessageRole.SYSTEM, content="You are a travel guide.")]
    for i in range(12):
        history.append(
            ChatMessage(
                role=MessageRole.USER, content=f"Tell me fact {i} about Paris, in detail please."
            )
        )
        history.append(
            ChatMessage(
                role=MessageRole.ASSISTANT,
                content=f"Fact {i}: " + "Paris has many bridges and museums. " * 4,
            )
        )
    history.append(ChatMessage(role=MessageRole.USER, content="Summarise what you told me."))
    slim = slim_chat_history(history, budget=Budget(total=400))
    print(f"--- chat history: {len(history)} messages -> {len(slim)}")
    for m in slim[:3]:
        print(f"{m.role.value:>9}: {(m.content or '')[:90]}")
    assert slim[-1] is history[-1]  # the last user message reaches the model unchanged


if __name__ == "__main__":
    main()

"""A LangChain RAG chain with promptslim, offline.

The base retriever over-fetches from an in-memory vector store (LangChain's deterministic fake
embeddings: no model download); ``PromptSlimRetriever`` runs promptslim's retrieval stage (BM25
scoring, no model either) to keep the documents worth their tokens, with their metadata and a
``promptslim_score``. ``PromptSlimRunnable`` then slims the chat messages (prefix and history
stages) right before the chat model, here LangChain's own fake chat model.

    python examples/langchain_rag.py
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore

from promptslim import STAGES, Budget, Pipeline
from promptslim.integrations.langchain import (
    PromptSlimCompressor,
    PromptSlimRetriever,
    PromptSlimRunnable,
)

DOCS = [
    ("The Eiffel Tower is 330 metres tall and stands in Paris.", "eiffel"),
    ("Paris is the capital of France, on the Seine.", "paris"),
    ("The Louvre in Paris is the most visited museum in the world.", "louvre"),
    ("Mount Everest is 8,849 metres high, on the Nepal-China border.", "everest"),
    ("The Seine flows 777 kilometres through northern France.", "seine"),
    ("Bananas are rich in potassium.", "banana"),
    ("The Eiffel Tower was completed in 1889 for the World's Fair.", "eiffel-history"),
]


def build_chain(
    model: FakeListChatModel,
) -> tuple[PromptSlimRetriever, Runnable[dict[str, Any], Any]]:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents([Document(page_content=t, metadata={"source": s}, id=s) for t, s in DOCS])
    retriever = PromptSlimRetriever(
        base_retriever=store.as_retriever(search_kwargs={"k": len(DOCS)}),  # over-fetch on purpose
        compressor=PromptSlimCompressor(
            stage=STAGES.get("retrieval")(scorer="bm25", max_k=3), budget=Budget(documents=200)
        ),
    )
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer from the context only.\n\nContext:\n{context}"),
            MessagesPlaceholder("history"),
            ("human", "{question}"),
        ]
    )
    slimmer = PromptSlimRunnable(
        stage=Pipeline([STAGES.get("prefix")(), STAGES.get("history")()]), budget=Budget(total=300)
    )

    def fmt(docs: list[Document]) -> str:
        return "\n".join(f"[{d.metadata['source']}] {d.page_content}" for d in docs)

    chain = (
        {
            "context": RunnableLambda(lambda x: x["question"]) | retriever | fmt,
            "question": RunnableLambda(lambda x: x["question"]),
            "history": RunnableLambda(lambda x: x["history"]),
        }
        | prompt
        | slimmer
        | RunnableLambda(_show)  # print what reaches the model
        | model
    )
    return retriever, chain


def _show(prompt: ChatPromptValue) -> ChatPromptValue:
    print("--- prompt sent to the chat model")
    for m in prompt.to_messages():
        print(f"{m.type:>6}: {m.content}")
    return prompt


def main() -> None:
    model = FakeListChatModel(responses=["The Eiffel Tower is 330 metres tall [eiffel]."])
    retriever, chain = build_chain(model)
    question = "How tall is the Eiffel Tower?"
    print("--- documents kept by promptslim")
    for doc in retriever.invoke(question):
        print(f"{doc.metadata['promptslim_score']:.3f}  {doc.id}  {doc.page_content}")
    history = [HumanMessage("Hi, I have questions about Paris."), AIMessage("Sure, ask away.")]
    answer = chain.invoke({"question": question, "history": history})
    print("--- answer")
    print(answer.content)


if __name__ == "__main__":
    main()

"""The chat page's words, French first, English available."""

from __future__ import annotations

from typing import Any

from engine.types import StopReason
from tracer.conversation import FollowUp
from tracer.render import DisplayMode, plain_fields

_FR: dict[str, str] = {
    "title": "Chatitego",
    "thinking": "Réflexion en cours…",
    "thinking_for": "Réflexion en cours… {s} s",
    "reasoning_done": "Raisonnement · {n} étape(s)",
    "reasoning": "Raisonnement",
    "reasoning_interrupted": "Raisonnement interrompu",
    "loading_cookies": "Chargement de la conversation…",
    "loading_models": "Chargement du modèle de langage (la première fois, cela peut prendre "
    "une minute)…",
    "loading_index": "Chargement des documents du thème « {theme} »…",
    "model_failed": "Le modèle de langage n'a pas pu être chargé : {error}",
    "model_failed_hint": "Vérifiez la configuration (README, tableau des réglages) puis "
    "rechargez la page. Sans clé ni serveur, Chatitego utilise son modèle local.",
    "theme_missing": "Le thème « {theme} » n'existe pas.",
    "theme_invalid": "« {theme} » n'est pas un nom de thème valide.",
    "no_theme": "Choisissez un thème pour commencer.",
    "no_themes_at_all": "Aucun thème n'existe encore. Un administrateur peut en créer un "
    "dans le RAG Manager, ou lancez `./run.sh` qui installe le thème de démonstration.",
    "open_theme": "Ouvrir",
    "pick_theme": "Thème",
    "index_failed": "Les documents du thème « {theme} » n'ont pas pu être chargés : {error}. "
    "Demandez à l'administrateur de lancer « Réparer » dans le RAG Manager.",
    "index_damaged": "Les documents du thème « {theme} » sont endommagés ({detail}) : "
    "Chatitego ne peut pas y répondre pour l'instant. Les documents eux-mêmes sont intacts ; "
    "un administrateur peut reconstruire l'index dans le RAG Manager (page Santé, "
    "« Réparer ») ou avec « python -m themes repair {theme} ».",
    "empty_index": "Ce thème n'a encore aucun document : les réponses ne s'appuieront sur "
    "aucune source.",
    "chat_placeholder": "Posez votre question…",
    "reply_placeholder": "Votre réponse à la question de Chatitego…",
    "settings": "Réglages",
    "language": "Langue",
    "detail": "Niveau de détail",
    "display": "Affichage du raisonnement",
    "new_conversation": "Nouvelle conversation",
    "export": "Exporter la conversation",
    "export_md": "Markdown",
    "export_pdf": "PDF",
    "sources": "Sources",
    "page": "p.",
    "score": "score",
    "ask_user": "Chatitego a besoin d'une précision : répondez dans la zone de saisie.",
    "older_not_kept": "Les {n} messages les plus anciens ne seront pas conservés si vous "
    "rechargez la page (le navigateur limite la taille des cookies) ; exportez la "
    "conversation pour tout garder.",
    "other_themes_not_kept": "Pour rester dans la limite du navigateur, la conversation des "
    "thèmes {themes} ne sera plus conservée en entier si vous rechargez la page.",
    "thanks": "Merci, votre avis est transmis à l'administrateur.",
    "model": "Modèle : {model}",
    "theme_docs": "{docs} document(s), {chunks} extrait(s)",
    "interrupted_turn": "La réponse précédente a été interrompue.",
    "unexpected": "Une erreur inattendue est survenue. Rechargez la page ; si elle revient, "
    "signalez-la à l'administrateur avec l'heure ({time}).",
}

_EN: dict[str, str] = {
    "title": "Chatitego",
    "thinking": "Thinking…",
    "thinking_for": "Thinking… {s} s",
    "reasoning_done": "Reasoning · {n} step(s)",
    "reasoning": "Reasoning",
    "reasoning_interrupted": "Reasoning interrupted",
    "loading_cookies": "Loading the conversation…",
    "loading_models": "Loading the language model (the first time may take a minute)…",
    "loading_index": "Loading the documents of theme “{theme}”…",
    "model_failed": "The language model could not be loaded: {error}",
    "model_failed_hint": "Check the configuration (README, settings table) and reload the "
    "page. Without a key or a server, Chatitego uses its local model.",
    "theme_missing": "Theme “{theme}” does not exist.",
    "theme_invalid": "“{theme}” is not a valid theme name.",
    "no_theme": "Pick a theme to start.",
    "no_themes_at_all": "No theme exists yet. An administrator can create one in the RAG "
    "Manager, or run `./run.sh`, which installs the demo theme.",
    "open_theme": "Open",
    "pick_theme": "Theme",
    "index_failed": "The documents of theme “{theme}” could not be loaded: {error}. Ask the "
    "administrator to run “Repair” in the RAG Manager.",
    "index_damaged": "The documents of theme “{theme}” are damaged ({detail}): Chatitego "
    "cannot answer from them for now. The documents themselves are intact; an administrator "
    "can rebuild the index in the RAG Manager (Health page, “Repair”) or with “python -m "
    "themes repair {theme}”.",
    "empty_index": "This theme has no document yet: answers will rely on no source.",
    "chat_placeholder": "Ask your question…",
    "reply_placeholder": "Your answer to Chatitego's question…",
    "settings": "Settings",
    "language": "Language",
    "detail": "Level of detail",
    "display": "Reasoning display",
    "new_conversation": "New conversation",
    "export": "Export the conversation",
    "export_md": "Markdown",
    "export_pdf": "PDF",
    "sources": "Sources",
    "page": "p.",
    "score": "score",
    "ask_user": "Chatitego needs more information: answer in the input box.",
    "older_not_kept": "The {n} oldest messages will not be kept if you reload the page "
    "(browsers limit cookie size); export the conversation to keep everything.",
    "other_themes_not_kept": "To stay within the browser's limit, the conversation of themes "
    "{themes} will no longer be kept whole if you reload the page.",
    "thanks": "Thank you, your feedback goes to the administrator.",
    "model": "Model: {model}",
    "theme_docs": "{docs} document(s), {chunks} passage(s)",
    "interrupted_turn": "The previous answer was interrupted.",
    "unexpected": "An unexpected error occurred. Reload the page; if it happens again, "
    "report it to the administrator with the time ({time}).",
}

_STOP_FR = {
    StopReason.MAX_STEPS: "Chatitego a atteint le nombre maximal d'étapes de raisonnement "
    "avant de conclure.",
    StopReason.FORCED_FINAL: "Le raisonnement a dû être conclu avant son terme : la réponse "
    "peut être incomplète.",
    StopReason.CANCELLED: "La réponse a été interrompue avant la fin.",
    StopReason.LLM_UNAVAILABLE: "Le modèle de langage ne répond pas. Vérifiez qu'il est "
    "joignable (serveur démarré, connexion), puis réessayez.",
    StopReason.LLM_AUTH_FAILED: "La clé d'accès au modèle est refusée. Vérifiez "
    "MISTRAL_API_KEY (ou la clé de votre serveur), puis réessayez.",
    StopReason.CONTEXT_OVERFLOW: "La question, la conversation et les documents trouvés ne "
    "tiennent pas dans la fenêtre du modèle. Posez une question plus courte ou commencez une "
    "nouvelle conversation (l'administrateur peut aussi augmenter LOCAL_LLM_CONTEXT).",
    StopReason.MODEL_ERROR: "Le modèle de langage n'a pas pu être chargé ou exécuté (fichier "
    "du modèle invalide, mémoire insuffisante, configuration). La réponse ci-dessus dit quoi "
    "corriger ; transmettez-la à l'administrateur.",
    StopReason.INTERNAL_ERROR: "Une erreur interne a interrompu ce tour. Réessayez ; si elle "
    "revient, signalez-la à l'administrateur.",
}
_STOP_EN = {
    StopReason.MAX_STEPS: "Chatitego reached the maximum number of reasoning steps before "
    "concluding.",
    StopReason.FORCED_FINAL: "The reasoning had to be concluded early: the answer may be "
    "incomplete.",
    StopReason.CANCELLED: "The answer was interrupted before the end.",
    StopReason.LLM_UNAVAILABLE: "The language model is not answering. Check that it can be "
    "reached (server started, connection), then retry.",
    StopReason.LLM_AUTH_FAILED: "The model's access key was refused. Check MISTRAL_API_KEY "
    "(or your server's key), then retry.",
    StopReason.CONTEXT_OVERFLOW: "The question, the conversation and the documents found do "
    "not fit in the model's window. Ask a shorter question or start a new conversation (the "
    "administrator can also raise LOCAL_LLM_CONTEXT).",
    StopReason.MODEL_ERROR: "The language model could not be loaded or run (invalid model "
    "file, not enough memory, configuration). The answer above says what to fix; pass it on "
    "to the administrator.",
    StopReason.INTERNAL_ERROR: "An internal error interrupted this turn. Retry; if it happens "
    "again, report it to the administrator.",
}

# The model's provider named, with what to check (models.llms.provider_of gives the key).
_PROVIDER_STOP_FR = {
    (StopReason.LLM_UNAVAILABLE, "mistral"): "Mistral ne répond pas. Réessayez dans un moment ; "
    "si cela dure, vérifiez la connexion à Internet, ou passez au modèle local (sans "
    "MISTRAL_API_KEY).",
    (StopReason.LLM_UNAVAILABLE, "openai_like"): "Le serveur compatible OpenAI ne répond pas. "
    "Vérifiez qu'il est démarré et joignable à l'adresse OPENAI_LIKE_BASE_URL, puis réessayez.",
    (StopReason.LLM_UNAVAILABLE, "local"): "Le modèle local n'a pas répondu à temps (machine "
    "très chargée ?). Réessayez ; l'administrateur peut augmenter LOCAL_LLM_TURN_BUDGET_S.",
    (StopReason.LLM_AUTH_FAILED, "mistral"): "Mistral refuse la clé d'accès. Vérifiez "
    "MISTRAL_API_KEY, puis réessayez.",
    (StopReason.LLM_AUTH_FAILED, "openai_like"): "Le serveur compatible OpenAI refuse la clé "
    "d'accès. Vérifiez OPENAI_LIKE_API_KEY, puis réessayez.",
}
_PROVIDER_STOP_EN = {
    (StopReason.LLM_UNAVAILABLE, "mistral"): "Mistral is not answering. Retry in a moment; if "
    "it lasts, check the Internet connection, or switch to the local model (without "
    "MISTRAL_API_KEY).",
    (StopReason.LLM_UNAVAILABLE, "openai_like"): "The OpenAI-compatible server is not "
    "answering. Check that it is started and reachable at OPENAI_LIKE_BASE_URL, then retry.",
    (StopReason.LLM_UNAVAILABLE, "local"): "The local model did not answer in time (a very "
    "busy machine?). Retry; the administrator can raise LOCAL_LLM_TURN_BUDGET_S.",
    (StopReason.LLM_AUTH_FAILED, "mistral"): "Mistral refused the access key. Check "
    "MISTRAL_API_KEY, then retry.",
    (StopReason.LLM_AUTH_FAILED, "openai_like"): "The OpenAI-compatible server refused the "
    "access key. Check OPENAI_LIKE_API_KEY, then retry.",
}

_FOLLOW_UP_FR = {
    FollowUp.CONTINUE: "Continuer",
    FollowUp.ANSWER_NOW: "Répondre avec ce qui est connu",
    FollowUp.RETRY: "Réessayer",
}
_FOLLOW_UP_EN = {
    FollowUp.CONTINUE: "Continue",
    FollowUp.ANSWER_NOW: "Answer with what is known",
    FollowUp.RETRY: "Retry",
}

_DISPLAY_FR = {
    DisplayMode.EVERYTHING: "Tout",
    DisplayMode.HIDE_THOUGHTS: "Masquer les pensées",
    DisplayMode.TOOL_CALLS_ONLY: "Appels d'outils seulement",
    DisplayMode.ANSWER_ONLY: "Réponse finale seulement",
}
_DISPLAY_EN = {
    DisplayMode.EVERYTHING: "Everything",
    DisplayMode.HIDE_THOUGHTS: "Hide thoughts",
    DisplayMode.TOOL_CALLS_ONLY: "Tool calls only",
    DisplayMode.ANSWER_ONLY: "Final answer only",
}

_DETAIL = {
    "fr": {"concise": "Concis", "standard": "Standard", "detailed": "Détaillé"},
    "en": {"concise": "Concise", "standard": "Standard", "detailed": "Detailed"},
}

LANGUAGES = {"fr": "Français", "en": "English"}


def text(language: str, key: str, **kw: Any) -> str:
    """A UI sentence in ``language`` (French when unknown), as Markdown; the fields are
    shown as plain text (escaped)."""
    table = _EN if language == "en" else _FR
    return table[key].format(**plain_fields(kw)) if kw else table[key]


def stop_text(language: str, stop: StopReason, provider: str | None = None) -> str:
    """Why a turn ended, in plain words with what to do; empty for a plain answer.

    ``provider`` ("mistral", "openai_like", "local") names the model that failed.
    """
    named = (_PROVIDER_STOP_EN if language == "en" else _PROVIDER_STOP_FR).get(
        (stop, provider or "")
    )
    return named or (_STOP_EN if language == "en" else _STOP_FR).get(stop, "")


def follow_up_label(language: str, action: FollowUp) -> str:
    return (_FOLLOW_UP_EN if language == "en" else _FOLLOW_UP_FR)[action]


def display_label(language: str, mode: DisplayMode) -> str:
    return (_DISPLAY_EN if language == "en" else _DISPLAY_FR)[mode]


def detail_label(language: str, detail: str) -> str:
    return _DETAIL["en" if language == "en" else "fr"].get(detail, detail)

"""The page's strings, French first, English available: ``t = texts("fr"); t("login")``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracer.render import plain_fields

Language = str  # "fr" or "en"

# key: (French, English); ``{name}`` fields are filled by ``str.format``.
TEXTS: dict[str, tuple[str, str]] = {
    "page_title": ("Gestionnaire RAG", "RAG Manager"),
    "language": ("Langue", "Language"),
    # access
    "not_configured": (
        "Aucun administrateur n'est configuré : cette page reste fermée.",
        "No administrator is configured: this page stays closed.",
    ),
    "how_to_configure": (
        "Pour l'ouvrir, créez le mot de passe administrateur puis redémarrez la page :",
        "To open it, make the admin password hash, then restart the page:",
    ),
    "how_to_configure_after": (
        'Copiez la ligne affichée dans `chatitego.toml` (`admin_password_hash = "..."`) '
        "ou dans la variable d'environnement `ADMIN_PASSWORD_HASH`. Une connexion par "
        "fournisseur d'identité (OIDC, `st.login`) est aussi possible : section `[auth]` de "
        "`.streamlit/secrets.toml` et liste `admin_emails` dans sa section `[manager]`.",
        'Put the printed line in `chatitego.toml` (`admin_password_hash = "..."`) or in '
        "the `ADMIN_PASSWORD_HASH` environment variable. Identity-provider login (OIDC, "
        "`st.login`) also works: an `[auth]` section in `.streamlit/secrets.toml` and an "
        "`admin_emails` list in its `[manager]` section.",
    ),
    "login_title": ("Connexion administrateur", "Administrator login"),
    "password": ("Mot de passe", "Password"),
    "login": ("Se connecter", "Log in"),
    "login_oidc": (
        "Se connecter avec le fournisseur d'identité",
        "Log in with the identity provider",
    ),
    "wrong_password": ("Mot de passe incorrect.", "Wrong password."),
    "throttled": (
        "Trop d'essais manqués : attendez {seconds} s avant de réessayer.",
        "Too many failed attempts: wait {seconds} s before trying again.",
    ),
    "expired": (
        "Session expirée après {minutes} min d'inactivité : reconnectez-vous.",
        "Session expired after {minutes} min without activity: log in again.",
    ),
    "bad_hash": (
        "Le mot de passe administrateur configuré est illisible ({error}).",
        "The configured admin password hash is unusable ({error}).",
    ),
    "oidc_refused": (
        "Le compte {email} n'est pas administrateur (liste `admin_emails`).",
        "The account {email} is not an administrator (`admin_emails` list).",
    ),
    "logout": ("Se déconnecter", "Log out"),
    # themes
    "themes": ("Thèmes", "Themes"),
    "theme_option": (
        "{name} : {documents} doc., {chunks} passages",
        "{name}: {documents} docs, {chunks} chunks",
    ),
    "no_theme": (
        "Aucun thème pour l'instant : créez le premier dans la barre latérale.",
        "No theme yet: create the first one in the sidebar.",
    ),
    "create_theme": ("Créer un thème", "Create a theme"),
    "theme_name": ("Identifiant (a-z, 0-9, - et _)", "Identifier (a-z, 0-9, - and _)"),
    "title": ("Titre", "Title"),
    "description": ("Description", "Description"),
    "create": ("Créer", "Create"),
    "created": ("Thème « {name} » créé.", "Theme '{name}' created."),
    "index_version": ("Version de l'index : {version}", "Index version: {version}"),
    "tab_settings": ("Réglages", "Settings"),
    "tab_documents": ("Documents", "Documents"),
    "tab_inspect": ("Inspecter", "Inspect"),
    "tab_health": ("Santé", "Health"),
    "tab_regression": ("Régression", "Regression"),
    "tab_review": ("Avis", "Reviews"),
    # settings
    "answer_language": ("Langue des réponses", "Answer language"),
    "detail": ("Niveau de détail", "Detail level"),
    "engine_mode": ("Moteur", "Engine"),
    "enabled_tools": ("Outils généraux autorisés (* = tous)", "Allowed general tools (* = all)"),
    "mcp_servers": ("Serveurs MCP (un par ligne)", "MCP servers (one per line)"),
    "mcp_help": (
        "Une ligne par serveur : `nom | commande ou URL | outils autorisés | VARIABLE_DU_JETON`. "
        "Seuls les outils autorisés (séparés par des virgules) sont proposés au chat, en "
        "lecture seule. Le dernier champ est le *nom* de la variable d'environnement qui "
        "contient le jeton, jamais le jeton. Exemple : "
        "`atelier | python -m demo_mcp.atelier | etat_machine, etat_atelier`",
        "One line per server: `name | command or URL | allowed tools | TOKEN_VARIABLE`. Only "
        "the allowed tools (comma-separated) are offered to the chat, read-only. The last "
        "field is the *name* of the environment variable holding the token, never the token. "
        "Example: `atelier | python -m demo_mcp.atelier | etat_machine, etat_atelier`",
    ),
    "mcp_test_title": ("Serveurs MCP : tester la connexion", "MCP servers: test the connection"),
    "mcp_test_server": ("Serveur", "Server"),
    "mcp_test_button": ("Tester la connexion", "Test the connection"),
    "mcp_test_none": (
        "Aucun serveur MCP enregistré pour ce thème.",
        "No MCP server saved for this theme.",
    ),
    "mcp_test_ok": (
        "{name} répond : {count} outil(s).",
        "{name} answers: {count} tool(s).",
    ),
    "mcp_tool_allowed": ("autorisé", "allowed"),
    "mcp_tool_not_allowed": ("non autorisé (pas proposé au chat)", "not allowed (not offered)"),
    "mcp_tool_writes": (
        "déclare écrire : jamais proposé au chat",
        "declares it writes: never offered to the chat",
    ),
    "mcp_fail_missing_token": (
        "Connexion impossible à {name} : la variable d'environnement {detail} (le jeton) "
        "n'est pas définie pour ce serveur Chatitego.",
        "Cannot connect to {name}: the environment variable {detail} (the token) is not set "
        "for this Chatitego server.",
    ),
    "mcp_fail_not_found": (
        "Connexion impossible à {name} : la commande {detail} est introuvable sur ce serveur.",
        "Cannot connect to {name}: the command {detail} is not found on this server.",
    ),
    "mcp_fail_unreachable": (
        "Connexion impossible à {name} : le serveur ne répond pas à cette adresse "
        "(est-il démarré ? l'URL est-elle juste ?).",
        "Cannot connect to {name}: nothing answers at that address (is it running? is the "
        "URL right?).",
    ),
    "mcp_fail_auth": (
        "Connexion refusée par {name} : le jeton est refusé ({detail}).",
        "{name} refused the connection: the token was rejected ({detail}).",
    ),
    "mcp_fail_timeout": (
        "{name} n'a pas répondu à temps ({detail}).",
        "{name} did not answer in time ({detail}).",
    ),
    "mcp_fail_error": (
        "Connexion impossible à {name} : {detail}",
        "Cannot connect to {name}: {detail}",
    ),
    "retrieval": ("Recherche", "Retrieval"),
    "wide_k": ("Candidats par recherche", "Candidates per retriever"),
    "top_k": ("Passages gardés", "Chunks kept"),
    "chunk_tokens": (
        "Taille des passages (jetons, 0 = maximum du modèle)",
        "Chunk size (tokens, 0 = model maximum)",
    ),
    "chunk_overlap": ("Chevauchement (jetons)", "Overlap (tokens)"),
    "compression": ("Compression contextuelle", "Contextual compression"),
    "compression_threshold": ("Seuil de compression", "Compression threshold"),
    "llm_extraction": ("Extraction par le LLM", "LLM extraction"),
    "translate_queries": ("Traduire les questions (FR↔EN)", "Translate questions (FR↔EN)"),
    "search_first": (
        "Chercher dans les documents avant la première étape du modèle",
        "Search the documents before the model's first step",
    ),
    "system_prompt": ("Prompt système (Markdown)", "System prompt (Markdown)"),
    "preview": ("Aperçu du prompt", "Prompt preview"),
    "prompt_history": (
        "{count} version(s) précédente(s) du prompt conservée(s).",
        "{count} previous prompt version(s) kept.",
    ),
    "save": ("Enregistrer", "Save"),
    "saved": (
        "Réglages enregistrés ; le chat les utilise dès la prochaine question.",
        "Settings saved; the chat uses them from the next question.",
    ),
    "reindex_hint": (
        "La taille des passages a changé : réindexez tout (page Documents) pour l'appliquer.",
        "The chunk size changed: re-index everything (Documents page) to apply it.",
    ),
    "danger": ("Supprimer le thème", "Delete the theme"),
    "confirm_name": ("Tapez « {name} » pour confirmer", "Type '{name}' to confirm"),
    "delete_theme": ("Supprimer définitivement", "Delete for good"),
    "theme_deleted": ("Thème « {name} » supprimé.", "Theme '{name}' deleted."),
    # documents
    "add_documents": ("Ajouter des documents", "Add documents"),
    "files": ("Fichiers ({types}, {mb} Mo max. chacun)", "Files ({types}, {mb} MB max each)"),
    "urls": ("Adresses web (une par ligne)", "Web addresses (one per line)"),
    "ingest": ("Ingérer", "Ingest"),
    "nothing_to_ingest": (
        "Choisissez des fichiers ou tapez des adresses.",
        "Choose files or type addresses.",
    ),
    "renamed": (
        "« {original} » est enregistré sous le nom « {name} » (dossiers, caractères de "
        "contrôle ou interdits retirés).",
        "“{original}” is stored as “{name}” (folders, control or forbidden characters removed).",
    ),
    "loading_model": ("Chargement du modèle d'embeddings…", "Loading the embedding model…"),
    "stage_reading": ("Lecture de {file}", "Reading {file}"),
    "stage_chunking": ("Découpage en passages", "Splitting into chunks"),
    "stage_embedding": (
        "Calcul des vecteurs : {done}/{total} passages",
        "Embedding: {done}/{total} chunks",
    ),
    "stage_writing": (
        "Publication de la nouvelle version de l'index",
        "Publishing the new index version",
    ),
    "batch_warnings": (
        "{count} fichier(s) indexé(s) avec une remarque à vérifier (colonne « Raison »), "
        "par exemple un texte qui n'était pas en UTF-8 et dont les accents peuvent être faux.",
        "{count} file(s) indexed with a note to check (column “Reason”), for example a text "
        "that was not UTF-8 and whose accents may be wrong.",
    ),
    "batch_done": (
        "Terminé : {ingested} ingéré(s), {updated} mis à jour, {unchanged} inchangé(s), "
        "{rejected} refusé(s), {removed} retiré(s).",
        "Done: {ingested} ingested, {updated} updated, {unchanged} unchanged, "
        "{rejected} rejected, {removed} removed.",
    ),
    "file": ("Fichier", "File"),
    "status": ("Statut", "Status"),
    "chunks": ("Passages", "Chunks"),
    "reason": ("Raison", "Reason"),
    "st_ingested": ("ingéré", "ingested"),
    "st_updated": ("mis à jour", "updated"),
    "st_unchanged": ("inchangé", "unchanged"),
    "st_rejected": ("refusé", "rejected"),
    "st_removed": ("retiré", "removed"),
    "doc_table": ("Documents du thème", "The theme's documents"),
    "no_documents": ("Aucun document dans ce thème.", "No document in this theme."),
    "name": ("Nom", "Name"),
    "size": ("Taille", "Size"),
    "pages": ("Pages", "Pages"),
    "hash": ("Empreinte", "Hash"),
    "ingested_at": ("Ingéré le", "Ingested at"),
    "ds_indexed": ("indexé", "indexed"),
    "ds_modified": ("modifié depuis l'indexation", "changed since indexed"),
    "ds_not_indexed": ("non indexé", "not indexed"),
    "ds_orphan": ("orphelin (fichier absent)", "orphan (file missing)"),
    "ds_no_chunks": ("sans passage", "no chunks"),
    "document": ("Document", "Document"),
    "delete_doc": ("Supprimer ce document", "Delete this document"),
    "confirm_delete_doc": ("Je confirme la suppression", "I confirm the deletion"),
    "doc_deleted": (
        "« {name} » supprimé ({chunks} passages retirés).",
        "'{name}' deleted ({chunks} chunks removed).",
    ),
    "reindex_one": ("Réindexer ce document", "Re-index this document"),
    "reindex_all": ("Tout réindexer", "Re-index everything"),
    "sync": ("Synchroniser le dossier", "Synchronise the folder"),
    "sync_help": (
        "Compare le dossier documents/ du thème à l'index : nouveaux, modifiés et supprimés.",
        "Compare the theme's documents/ folder with the index: new, changed and removed files.",
    ),
    # inspect
    "chunk_viewer": ("Passages d'un document", "A document's chunks"),
    "page": ("Page", "Page"),
    "chunk_header": ("Passage {position}/{total}", "Chunk {position}/{total}"),
    "chunk_page_info": ("page {page}", "page {page}"),
    "metadata": ("Métadonnées", "Metadata"),
    "retrieval_test": ("Test de recherche", "Retrieval test"),
    "question": ("Question", "Question"),
    "search": ("Chercher", "Search"),
    "no_llm_note": (
        "Sans LLM ici : pas de traduction de la question ni d'extraction par le LLM.",
        "No LLM here: no question translation and no LLM extraction.",
    ),
    "no_result": ("Aucun passage trouvé.", "No chunk found."),
    "rank": ("Rang", "Rank"),
    "vector": ("Vecteur", "Vector"),
    "keyword": ("Mots-clés", "Keywords"),
    "fused": ("Fusion", "Fused"),
    "rerank": ("Score final", "Final score"),
    "cited_as": ("Cité comme", "Cited as"),
    "context": ("Contexte compressé envoyé au modèle", "Compressed context sent to the model"),
    "full_text": ("Texte complet", "Full text"),
    "kept_text": ("Texte gardé", "Kept text"),
    "timings": ("Durées (ms) : {timings}", "Timings (ms): {timings}"),
    # health
    "documents": ("Documents", "Documents"),
    "orphans": ("Orphelins", "Orphans"),
    "version": ("Version", "Version"),
    "health_ok": (
        "Index cohérent avec le dossier des documents.",
        "The index matches the documents folder.",
    ),
    "stale_files": (
        "Modifiés depuis l'indexation (synchronisez) : {files}",
        "Changed since indexed (synchronise): {files}",
    ),
    "unindexed_files": ("Non indexés : {files}", "Not indexed: {files}"),
    "orphan_docs": ("Passages sans fichier : {files}", "Chunks without a file: {files}"),
    "repair": ("Réparer", "Repair"),
    "clear_index": ("Vider l'index", "Clear the index"),
    "confirm_clear": (
        "Je confirme : l'index sera vide (les fichiers restent ; « Synchroniser » le reconstruit)",
        "I confirm: the index will be empty (files are kept; Synchronise rebuilds it)",
    ),
    "cleared": ("Index vidé (version {version}).", "Index cleared (version {version})."),
    # regression
    "regression_intro": (
        "Chaque question nomme le document qui doit être retrouvé ; elles sont rejouées "
        "après chaque ingestion.",
        "Each question names the document that must be retrieved; they run again after "
        "each ingestion.",
    ),
    "expected_document": ("Document attendu", "Expected document"),
    "add_question": ("Ajouter la question", "Add the question"),
    "run_now": ("Lancer maintenant", "Run now"),
    "k": ("k (rang maximal compté)", "k (highest rank counted)"),
    "hit_at_k": ("hit@{k} : {hits}/{total} ({rate:.0%})", "hit@{k}: {hits}/{total} ({rate:.0%})"),
    "last_rank": ("Dernier rang", "Last rank"),
    "missed": ("manqué", "missed"),
    "delete_question": ("Supprimer la question", "Delete the question"),
    "no_questions": ("Aucune question enregistrée.", "No question recorded."),
    "regression_before_after": (
        "Questions de régression : hit@{k} avant {before}/{total}, après {after}/{total}.",
        "Regression questions: hit@{k} before {before}/{total}, after {after}/{total}.",
    ),
    "regression_worse": (
        "⚠️ Cette mise à jour dégrade la recherche pour {count} question(s) : vérifiez "
        "les documents ajoutés ou modifiés.",
        "⚠️ This update makes retrieval worse for {count} question(s): check the added or "
        "changed documents.",
    ),
    "before": ("Avant", "Before"),
    "after": ("Après", "After"),
    "runs_history": ("Historique des exécutions", "Run history"),
    # review
    "filter": ("Filtre", "Filter"),
    "all": ("Tous", "All"),
    "no_feedback": ("Aucun avis pour ce thème.", "No feedback for this theme."),
    "answer": ("Réponse", "Answer"),
    "sources": ("Sources", "Sources"),
    "reasoning": ("Raisonnement", "Reasoning"),
    "open_chunks": ("Ouvrir les passages", "Open the chunks"),
    "chunk_gone": (
        "{chunk} : ce passage n'est plus dans l'index (document modifié ou supprimé).",
        "{chunk}: this chunk is no longer in the index (document changed or removed).",
    ),
    # errors
    "unexpected": (
        "Une erreur inattendue a interrompu l'action ; rien n'a été publié à moitié. "
        "Réessayez, et si cela se répète, consultez le journal du serveur.",
        "An unexpected error stopped the action; nothing was half-published. Try again, "
        "and if it happens again, look at the server log.",
    ),
}


def texts(language: Language) -> Callable[..., str]:
    """The lookup function for ``language`` (unknown languages get French)."""
    index = 1 if language == "en" else 0

    def t(key: str, **fields: Any) -> str:
        text = TEXTS[key][index]
        # Every sentence is shown as Markdown: the fields (names, titles, errors) as text.
        return text.format(**plain_fields(fields)) if fields else text

    return t

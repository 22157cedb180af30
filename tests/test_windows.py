"""Windows cmd and PowerShell messages in the languages Microsoft ships (unstuck.recognise.windows,
data/windows_messages.yaml), each tested on the text as the shell prints it: cmd's two-line
message with its line break, PowerShell's error record with its position lines."""

from __future__ import annotations

import pytest

from unstuck.core.situations import Kind
from unstuck.recognise.classify import classify_output, explain_output
from unstuck.recognise.windows import WindowsMessageError, message_pattern, parse_windows_messages

#: cmd.exe's "not recognised" message as printed, per Windows display language, for `nmpx`.
CMD_NOT_RECOGNISED = {
    "en": "'nmpx' is not recognized as an internal or external command,\noperable program or batch file.",
    "fr": "'nmpx' n’est pas reconnu en tant que commande interne\nou externe, un programme exécutable ou un fichier de commandes.",
    "de": "Der Befehl \"nmpx\" ist entweder falsch geschrieben oder\nkonnte nicht gefunden werden.",
    "es": "\"nmpx\" no se reconoce como un comando interno o externo,\nprograma o archivo por lotes ejecutable.",
    "pt-BR": "'nmpx' não é reconhecido como um comando interno\nou externo, um programa operável ou um arquivo em lotes.",
    "pt-PT": "'nmpx' não é reconhecido como um comando interno ou externo,\nprograma operável ou ficheiro batch.",
    "it": "'nmpx' non è riconosciuto come comando interno o esterno,\n un programma eseguibile o un file batch.",
    "ja": "'nmpx' は、内部コマンドまたは外部コマンド、\n操作可能なプログラムまたはバッチ ファイルとして認識されていません。",
    "zh-CN": "'nmpx' 不是内部或外部命令，也不是可运行的程序\n或批处理文件。",
    "zh-TW": "'nmpx' 不是內部或外部命令、可執行的程式或批次檔。",
    "ko": "'nmpx'은(는) 내부 또는 외부 명령, 실행할 수 있는 프로그램, 또는\n배치 파일이 아닙니다.",
    "ru": "\"nmpx\" не является внутренней или внешней\nкомандой, исполняемой программой или пакетным файлом.",
    "pl": "'nmpx' nie jest rozpoznawany jako polecenie wewnętrzne lub zewnętrzne,\nprogram wykonywalny lub plik wsadowy.",
    "tr": "'nmpx' iç ya da dış komut, çalıştırılabilir\nprogram ya da toplu iş dosyası olarak tanınmıyor.",
    "nl": "'nmpx' wordt niet herkend als een interne\nof externe opdracht, programma of batchbestand.",
}

#: PowerShell's execution-policy refusal as printed (its first line), per language.
EXECUTION_POLICY = {
    "en": "npm : File C:\\Program Files\\nodejs\\npm.ps1 cannot be loaded because running scripts is disabled on this system.",
    "fr": "npm : Impossible de charger le fichier C:\\Program Files\\nodejs\\npm.ps1, car l’exécution de scripts est désactivée sur ce système.",
    "de": "npm : Die Datei \"C:\\Program Files\\nodejs\\npm.ps1\" kann nicht geladen werden, da die Ausführung von Skripts auf diesem System deaktiviert ist.",
    "es": "npm : No se puede cargar el archivo C:\\Program Files\\nodejs\\npm.ps1 porque la ejecución de scripts está deshabilitada en este sistema.",
    "pt-BR": "npm : O arquivo C:\\Program Files\\nodejs\\npm.ps1 não pode ser carregado porque a execução de scripts foi desabilitada neste sistema.",
    "pt-PT": "npm : Não é possível carregar o ficheiro C:\\Program Files\\nodejs\\npm.ps1 porque a execução de scripts está desativada neste sistema.",
    "it": "npm : Impossibile caricare il file C:\\Program Files\\nodejs\\npm.ps1. L'esecuzione di script è disabilitata nel sistema in uso.",
    "ja": "npm : このシステムではスクリプトの実行が無効になっているため、ファイル C:\\Program Files\\nodejs\\npm.ps1 を読み込むことができません。",
    "zh-CN": "npm : 无法加载文件 C:\\Program Files\\nodejs\\npm.ps1，因为在此系统上禁止运行脚本。",
    "zh-TW": "npm : 因為這個系統上已停用指令碼執行，所以無法載入 C:\\Program Files\\nodejs\\npm.ps1 檔案。",
    "ko": "npm : 이 시스템에서 스크립트를 실행할 수 없으므로 C:\\Program Files\\nodejs\\npm.ps1 파일을 로드할 수 없습니다.",
    "ru": "npm : Невозможно загрузить файл C:\\Program Files\\nodejs\\npm.ps1, так как выполнение сценариев отключено в этой системе.",
    "pl": "npm : Nie można załadować pliku C:\\Program Files\\nodejs\\npm.ps1, ponieważ uruchamianie skryptów jest wyłączone w tym systemie.",
    "tr": "npm : C:\\Program Files\\nodejs\\npm.ps1 dosyası yüklenemiyor, bu sistemde betiklerin çalıştırılması devre dışı bırakıldığından.",
    "nl": "npm : Kan bestand C:\\Program Files\\nodejs\\npm.ps1 niet laden, omdat het uitvoeren van scripts is uitgeschakeld op dit systeem.",
}

#: Win32 ERROR_PATH_NOT_FOUND as cmd prints it (cd, dir, a batch file's call), per language.
PATH_NOT_FOUND = {
    "en": "The system cannot find the path specified.",
    "fr": "Le chemin d’accès spécifié est introuvable.",
    "de": "Das System kann den angegebenen Pfad nicht finden.",
    "es": "El sistema no puede encontrar la ruta especificada.",
    "pt-BR": "O sistema não pode encontrar o caminho especificado.",
    "pt-PT": "O sistema não conseguiu localizar o caminho especificado.",
    "it": "Impossibile trovare il percorso specificato.",
    "ja": "指定されたパスが見つかりません。",
    "zh-CN": "系统找不到指定的路径。",
    "zh-TW": "系統找不到指定的路徑。",
    "ko": "지정된 경로를 찾을 수 없습니다.",
    "ru": "Системе не удается найти указанный путь.",
    "pl": "System nie może odnaleźć określonej ścieżki.",
    "tr": "Sistem belirtilen yolu bulamıyor.",
    "nl": "Het systeem kan het opgegeven pad niet vinden.",
}

#: Win32 ERROR_ACCESS_DENIED as cmd prints it, per language.
ACCESS_DENIED = {
    "en": "Access is denied.",
    "fr": "Accès refusé.",
    "de": "Zugriff verweigert",
    "es": "Acceso denegado.",
    "pt-BR": "Acesso negado.",
    "pt-PT": "Acesso negado.",
    "it": "Accesso negato.",
    "ja": "アクセスが拒否されました。",
    "zh-CN": "拒绝访问。",
    "zh-TW": "存取被拒。",
    "ko": "액세스가 거부되었습니다.",
    "ru": "Отказано в доступе.",
    "pl": "Odmowa dostępu.",
    "tr": "Erişim engellendi.",
    "nl": "Toegang geweigerd.",
}

#: PowerShell's CommandNotFoundException as printed, per language.
POWERSHELL_NOT_RECOGNISED = {
    "en": "nmpx : The term 'nmpx' is not recognized as the name of a cmdlet, function, script file, or operable program.",
    "fr": "nmpx : Le terme «nmpx» n'est pas reconnu comme nom d'applet de commande, fonction, fichier de script ou programme exécutable.",
    "de": "nmpx : Die Benennung \"nmpx\" wurde nicht als Name eines Cmdlet, einer Funktion, einer Skriptdatei oder eines ausführbaren Programms erkannt.",
    "es": "nmpx : El término 'nmpx' no se reconoce como nombre de un cmdlet, función, archivo de script o programa ejecutable.",
    "pt-BR": "nmpx : O termo 'nmpx' não é reconhecido como nome de cmdlet, função, arquivo de script ou programa operável.",
    "it": "nmpx : Termine 'nmpx' non riconosciuto come nome di cmdlet, funzione, programma eseguibile o file script.",
    "ja": "nmpx : 用語 'nmpx' は、コマンドレット、関数、スクリプト ファイル、または操作可能なプログラムの名前として認識されません。",
    "zh-CN": "nmpx : 无法将“nmpx”项识别为 cmdlet、函数、脚本文件或可运行程序的名称。",
    "ko": "nmpx : 'nmpx' 용어가 cmdlet, 함수, 스크립트 파일 또는 실행할 수 있는 프로그램 이름으로 인식되지 않습니다.",
    "ru": "nmpx : Имя \"nmpx\" не распознано как имя командлета, функции, файла сценария или выполняемой программы.",
    "pl": "nmpx : Termin „nmpx” nie jest rozpoznawany jako nazwa polecenia cmdlet, funkcji, pliku skryptu lub programu wykonywalnego.",
    "nl": "nmpx : De term 'nmpx' wordt niet herkend als de naam van een cmdlet, functie, scriptbestand of uitvoerbaar programma.",
}


@pytest.mark.parametrize("lang", sorted(CMD_NOT_RECOGNISED))
def test_cmd_not_recognised_is_a_missing_program_named_in_every_language(lang: str) -> None:
    situation = classify_output("cmd", {}, CMD_NOT_RECOGNISED[lang], exit_code=9009)
    assert situation is not None and (situation.kind, situation.subject) == (Kind.NOT_INSTALLED, "nmpx")


@pytest.mark.parametrize("lang", sorted(CMD_NOT_RECOGNISED))
def test_cmd_not_recognised_is_read_without_an_exit_code(lang: str) -> None:
    situation = classify_output("cmd", {}, "C:\\work>run.bat\n" + CMD_NOT_RECOGNISED[lang])
    assert situation is not None and situation.kind is Kind.NOT_INSTALLED


@pytest.mark.parametrize("lang", sorted(EXECUTION_POLICY))
def test_an_execution_policy_refusal_is_permission_in_every_language(lang: str) -> None:
    printed = EXECUTION_POLICY[lang] + "\nAt line:1 char:1\n+ npm install\n+ ~~~"
    situation = classify_output("powershell", {}, printed, exit_code=1)
    assert situation is not None and situation.kind is Kind.PERMISSION


@pytest.mark.parametrize("lang", sorted(PATH_NOT_FOUND))
def test_path_not_found_is_not_found_in_every_language(lang: str) -> None:
    situation = classify_output("cmd", {}, "C:\\>cd C:\\nowhere\n" + PATH_NOT_FOUND[lang], exit_code=1)
    assert situation is not None and situation.kind is Kind.NOT_FOUND


@pytest.mark.parametrize("lang", sorted(ACCESS_DENIED))
def test_access_denied_is_permission_in_every_language(lang: str) -> None:
    situation = classify_output("cmd", {}, "C:\\>del C:\\Windows\\System32\\drivers\\etc\\hosts\n" + ACCESS_DENIED[lang],
                                exit_code=1)
    assert situation is not None and situation.kind is Kind.PERMISSION


@pytest.mark.parametrize("lang", sorted(POWERSHELL_NOT_RECOGNISED))
def test_powershell_command_not_found_is_a_missing_program_in_every_language(lang: str) -> None:
    printed = POWERSHELL_NOT_RECOGNISED[lang] + "\nAt line:1 char:1\n+ nmpx install\n+ ~~~~"
    situation = classify_output("powershell", {}, printed, exit_code=1)
    assert situation is not None and (situation.kind, situation.subject) == (Kind.NOT_INSTALLED, "nmpx")


def test_the_untranslated_error_id_decides_a_refusal_in_a_language_without_a_row() -> None:
    # Swedish: no text row; the error record's FullyQualifiedErrorId is the same in every language
    printed = ("npm : Det går inte att läsa in filen C:\\npm.ps1.\n    + CategoryInfo          : SecurityError: (:) [], "
               "PSSecurityException\n    + FullyQualifiedErrorId : UnauthorizedAccess")
    found = explain_output("powershell", {}, printed, exit_code=1)
    assert found.situation is not None and found.situation.kind is Kind.PERMISSION
    assert found.decided_by is not None and "UnauthorizedAccess" in found.decided_by.rule


@pytest.mark.parametrize(
    "printed",
    [
        "'--chatgpt_apikey' は、内部コマンドまたは外部コマンド、\n操作可能なプログラムまたはバッチ ファイルとして認識されていません。",
        "'-o' is not recognized as an internal or external command,\noperable program or batch file.",
        "bash: --silent: command not found",
    ],
)
def test_a_shell_that_cannot_find_an_option_read_an_argument_as_a_command(printed: str) -> None:
    situation = classify_output("cmd", {}, printed, exit_code=1)
    assert situation is not None and situation.kind is Kind.INVALID_ARGS


def test_one_option_among_the_names_makes_the_whole_output_a_split_command_line() -> None:
    printed = ("'ot.py' は、内部コマンドまたは外部コマンド、\n操作可能なプログラムまたはバッチ ファイルとして認識されていません。\n"
               "'--port' は、内部コマンドまたは外部コマンド、\n操作可能なプログラムまたはバッチ ファイルとして認識されていません。")
    situation = classify_output("cmd", {}, printed)
    assert situation is not None and (situation.kind, situation.subject) == (Kind.INVALID_ARGS, "--port")


def test_a_pattern_matches_any_quote_mark_and_any_line_wrap() -> None:
    import re2

    pattern = re2.compile(message_pattern("'%1' is not recognized as an internal or external command,", subject=True))
    assert pattern.search("“rollup” is not recognized as an\ninternal or external command,").group(1) == "rollup"
    assert pattern.search("nmp' is not recognized as an internal or external command,") is not None


def test_a_malformed_windows_message_is_a_loud_error() -> None:
    with pytest.raises(WindowsMessageError, match="message 1: needs a source"):
        parse_windows_messages({"messages": [{"id": "x", "kind": "permission", "texts": {"en": "access is denied."}}]})
    with pytest.raises(WindowsMessageError, match="has %1 in every text"):
        parse_windows_messages({"messages": [{"id": "x", "kind": "not_installed", "subject": True, "source": "s",
                                              "texts": {"en": "'%1' is not recognized", "fr": "pas reconnu"}}]})

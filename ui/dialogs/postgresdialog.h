#pragma once

#include "dialogs/connectiondialog.h"

class QComboBox;
class QLineEdit;
class QSpinBox;

namespace once::ui {

// File > Open PostgreSQL Store: the fields of a postgres:// URL, one by one. The
// password is typed into a masked field and goes no further than url(), which the
// window opens the store with; it is saved only in the system keychain, and only with
// Remember ticked (SavedPasswords). Without one, libpq looks in PGPASSWORD and
// ~/.pgpass, as psql does (and as Open Recent relies on).
class PostgresDialog final : public ConnectionDialog
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(PostgresDialog)

public:
    explicit PostgresDialog(QWidget *parent = nullptr);

    // Fills the fields from a postgres:// URL (a recent store, or one that failed to
    // open); its password, if any, goes into the masked field.
    void setUrl(const QString &url);
    // postgres://USER[:PASSWORD]@HOST:PORT/DB[?sslmode=MODE]
    QString url() const;

    QLineEdit *hostField() const { return m_host; }
    QSpinBox *portField() const { return m_port; }
    QLineEdit *databaseField() const { return m_database; }
    QLineEdit *userField() const { return m_user; }
    QLineEdit *passwordField() const { return m_password; }
    QComboBox *sslModeField() const { return m_sslMode; }

private:
    void updateOk();

    QLineEdit *m_host = nullptr;
    QSpinBox *m_port = nullptr;
    QLineEdit *m_database = nullptr;
    QLineEdit *m_user = nullptr;
    QLineEdit *m_password = nullptr;
    QComboBox *m_sslMode = nullptr;
    // Query options of a URL given to setUrl() other than sslmode (connect_timeout, ...),
    // kept so that reopening it keeps them.
    QList<std::pair<QString, QString>> m_otherOptions;
};

} // namespace once::ui

#pragma once

#include "settings/savedpasswords.h"

#include <QDialog>

class QCheckBox;
class QDialogButtonBox;
class QFormLayout;
class QLabel;

namespace once::ui {

// What the dialogs that open a store or a queue share: a form of connection fields, a
// preview of what will be opened (as the window will name it, without the password), a
// note on what happens to the password, "Remember the password in the system keychain",
// and Open, enabled only for something openable.
class ConnectionDialog : public QDialog
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(ConnectionDialog)

public:
    // Remember ticked when this connection's password is remembered; without a keychain
    // it cannot be ticked, and the dialog says why. message: why the dialog asks now
    // ("the keychain holds no password for it"), or empty.
    void setKeychain(SavedPasswords::Keychain keychain, const QString &unavailableReason, bool remembered,
                     const QString &message = QString());
    bool rememberPassword() const;
    QCheckBox *rememberField() const { return m_remember; }

protected:
    explicit ConnectionDialog(QWidget *parent);

    // Puts the preview under the form's fields, then the note and the buttons.
    void layOut(QFormLayout *form, const QString &previewLabel, const QString &passwordNote,
                int minimumWidth);
    void setPreview(const QString &text, bool openable);
    QLabel *preview() const { return m_preview; }
    // For the subclass's form, under the password field: the Remember box and what the
    // dialog has to say about the keychain.
    void addRememberRow(QFormLayout *form);

private:
    QLabel *m_preview = nullptr;
    QCheckBox *m_remember = nullptr;
    QLabel *m_keychainNote = nullptr;
    QDialogButtonBox *m_buttons = nullptr;
};

} // namespace once::ui
